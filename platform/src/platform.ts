import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import type { Kafka } from 'kafkajs';
import type { Registry } from 'prom-client';
import { createApiService, migrateApi } from '@ofp/api';
import { createAuthService, ensureDemoTenant, migrateAuth, type DemoTenant } from '@ofp/auth';
import {
  BearerGate,
  authMetrics,
  RevocationDenyList,
  TokenBucketLimiter,
  createJwksKeySource,
  createTokenVerifier,
  issuerFromPublicUrl,
  revocationsModule,
} from '@ofp/auth-tokens';
import {
  KafkaBus,
  OutboxRelay,
  PgLogBus,
  createKafkaClient,
  kafkaBrokerCheck,
  topicOf,
  type Bus,
  type TopicSettings,
} from '@ofp/bus';
import { EventStore, migrateEventStore } from '@ofp/event-store';
import { createProjectorModule } from '@ofp/projector';
import {
  ConfigError,
  ModuleRunner,
  STANDALONE_FILES,
  closeServer,
  createDependencyHealth,
  createHttpApp,
  createLogger,
  createMetricsRegistry,
  createPool,
  listen,
  loadConfig,
  logFormatFor,
  postgresCheck,
  runUntilSignal,
  startEmbeddedPostgres,
  type LogFormat,
  type Logger,
  type Module,
  type Pool,
  type Route,
} from '@ofp/runtime';
import { telemetryModule } from '@ofp/runtime/telemetry';
import {
  createWebhookDispatcher,
  eventCatalog,
  migrateWebhookDispatcher,
  webhookDispatcherSettings,
} from '@ofp/webhook-dispatcher';
import { platformConfigSchema, type PlatformConfig, type Target } from './config.js';
import { servedDescriptions } from './descriptions.js';
import { registerFlowMetrics } from './observability.js';
import { preflight } from './preflight.js';
import { runbookRoutes } from './runbooks.js';
import { platformStreamTypes } from './streams.js';

type Service = Exclude<Target, 'all' | 'migrate'>;

/** What a service brings to the process: its modules and its part of the route table. */
interface ServiceParts {
  readonly modules: readonly Module[];
  readonly routes: readonly Route[];
  /** The operators' API (API.md §10): on PORT standalone, on ADMIN_PORT alone in the distributed shape. */
  readonly adminRoutes?: readonly Route[];
}

/** What every service is built from: one of each per process. */
interface Infrastructure {
  readonly config: PlatformConfig;
  readonly logger: Logger;
  readonly pool: Pool;
  readonly databaseUrl: string;
  readonly store: EventStore;
  readonly bus: Bus;
  readonly kafka: Kafka | undefined;
  readonly clock: () => Date;
  /** The process's one metrics registry, which every module registers into. */
  readonly metrics: Registry;
  readonly publicUrl: string;
  readonly adminToken: string | undefined;
  /** Bearer verification for the services that serve `/v2` (its deny-list fed by the revocations module). */
  readonly gate: () => BearerGate;
}

const SERVICES: readonly Service[] = ['auth', 'api', 'projector', 'webhook-dispatcher'];

/**
 * The composition root of every process: TARGET names the service to run (the distributed shape,
 * one process per service), or `all` of them in one process on an embedded Postgres with the
 * Postgres-log bus (standalone), compare Grafana Loki/Mimir's `-target`. Each service declares its
 * modules with their dependencies; the runner starts them in that order and stops them in reverse.
 */
export async function runPlatform(
  environment: NodeJS.ProcessEnv,
  shutdownTelemetry: () => Promise<void>,
): Promise<void> {
  let config: PlatformConfig;
  try {
    config = loadConfig(platformConfigSchema, environment);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
  const logFormat = logFormatFor(config.LOG_FORMAT);
  const logger = createLogger({ name: `ofp-${config.TARGET}`, level: config.LOG_LEVEL, format: logFormat });
  // The auth service appends to the outbox and never talks to Kafka (the api's relay publishes).
  const kafkaClient =
    config.KAFKA_BROKERS && config.TARGET !== 'auth' && config.TARGET !== 'migrate'
      ? await createKafkaClient(config, `${config.KAFKA_CLIENT_ID}-${config.TARGET}`)
      : undefined;
  const instance = await preflight(
    config,
    kafkaClient && { client: kafkaClient, topics: platformTopics(config) },
  );
  const database = await openDatabase(config, logger);
  const pool = createPool({
    connectionString: database.url,
    applicationName: `ofp-${config.TARGET}`,
    max: config.DATABASE_POOL_SIZE,
  });

  if (config.TARGET === 'migrate') {
    await migrateAll(pool, logger);
    await pool.end();
    logger.info('migrations applied');
    return;
  }

  const target = config.TARGET;
  const services = target === 'all' ? SERVICES : [target];
  const clock = (): Date => new Date();
  const kafka = kafkaClient?.kafka;
  // Outbox rows are written in every process of a Kafka deployment (the api's relay publishes what
  // any service appended, the auth service's revocations included); standalone reads the log itself.
  const store = new EventStore(pool, { outbox: kafka !== undefined || target !== 'all' });
  // The standalone bus's consumers read the log with one statement for which Postgres kept choosing a
  // custom plan: about 100 µs of planning per read, two reads per write (pg_stat_statements). Their
  // own small pool plans it once.
  let readers: Pool | undefined;
  let bus: Bus;
  if (kafka) {
    bus = new KafkaBus(kafka, logger, {
      topics: topicsOf(config),
      batchSize: 500,
      sessionTimeoutMs: config.KAFKA_SESSION_TIMEOUT_MS,
      onRequestTimeout: (broker) => kafkaClient.timedOut(broker),
    });
  } else {
    readers = createPool({
      connectionString: database.url,
      applicationName: `ofp-${target}-bus`,
      max: 4,
      genericPlans: true,
    });
    const log = new EventStore(readers, { outbox: false });
    bus = new PgLogBus(readers, database.url, log, logger, { batchSize: 500, pollIntervalMs: 1000 });
  }
  const publicUrl = config.PUBLIC_URL ?? `http://localhost:${config.PORT}`;
  const adminToken =
    config.ADMIN_TOKEN ?? (config.TARGET === 'all' ? await standaloneAdminToken(config.DATA_DIR) : undefined);

  const metrics = createMetricsRegistry(`ofp-${config.TARGET}`);
  // The outbox is published by the relay, which runs with the api (see serviceParts).
  registerFlowMetrics(metrics, bus, kafka && services.includes('api') ? store : undefined);
  const infrastructure: Omit<Infrastructure, 'gate'> = {
    config,
    logger,
    pool,
    databaseUrl: database.url,
    store,
    bus,
    kafka,
    clock,
    metrics,
    publicUrl,
    adminToken,
  };
  const verification = services.some((service) => service === 'api' || service === 'webhook-dispatcher')
    ? tokenVerification(infrastructure)
    : undefined;
  const parts = services.map((service) =>
    serviceParts(service, {
      ...infrastructure,
      gate: () => {
        if (!verification) throw new Error(`${service} serves /v2 without token verification`);
        return verification.gate;
      },
    }),
  );

  const modules: Module[] = [
    telemetryModule(shutdownTelemetry),
    {
      name: 'database',
      dependsOn: ['telemetry'],
      start: () => (target === 'all' ? migrateAll(pool, logger) : migrateOwn(target, pool, logger)),
      async stop() {
        await bus.close();
        await readers?.end();
        await pool.end();
        await database.stop();
      },
      ready: () => true,
    },
    // Readiness (API.md §3): 503 while Postgres, or the Kafka a consumer reads, does not answer.
    {
      ...createDependencyHealth({
        checks: [
          postgresCheck(database.url, { knownDown: () => database.down?.() === true }),
          ...(kafka && target !== 'auth' ? [kafkaBrokerCheck(kafka, config.KAFKA_BROKERS ?? [])] : []),
        ],
        logger,
        metrics,
      }),
      dependsOn: ['database'],
    },
    ...(verification ? [verification.module] : []),
    ...parts.flatMap((part) => part.modules),
  ];
  // The admin API is for operators: the distributed auth service serves it on a port of its own, which
  // the chart exposes inside the cluster only (API.md §10); standalone keeps it on PORT.
  const adminRoutes = parts.flatMap((part) => part.adminRoutes ?? []);
  const adminPort = target !== 'all' && adminRoutes.length > 0 ? config.ADMIN_PORT : undefined;
  // Every process serves the description of the whole platform (API.md §11), whatever its TARGET.
  const routes = [
    ...parts.flatMap((part) => part.routes),
    ...(adminPort === undefined ? adminRoutes : []),
    ...(await servedDescriptions({ publicUrl, topicPrefix: config.KAFKA_TOPIC_PREFIX })),
    ...(await runbookRoutes()),
  ];
  let server: Server | undefined;
  let adminServer: Server | undefined;
  const runner: ModuleRunner = new ModuleRunner(
    [
      ...modules,
      {
        // The listener opens once everything it serves is up, and closes first.
        name: 'http',
        dependsOn: modules.map((module) => module.name),
        async start() {
          const app = createHttpApp({
            logger,
            metrics,
            ready: () => runner.ready(),
            routes,
            trustedProxyHops: config.TRUSTED_PROXY_HOPS,
          });
          const listening = await listen(app, config.PORT, config.HOST);
          server = listening.server;
          logger.info(
            { port: listening.port, target: config.TARGET, public_url: publicUrl },
            `listening on ${publicUrl}`,
          );
          if (adminPort !== undefined) {
            const adminApp = createHttpApp({
              logger,
              metrics,
              ready: () => runner.ready(),
              routes: adminRoutes,
              trustedProxyHops: config.TRUSTED_PROXY_HOPS,
            });
            const admin = await listen(adminApp, adminPort, config.HOST);
            adminServer = admin.server;
            logger.info({ port: admin.port }, `admin API listening on port ${admin.port}`);
          }
          if (config.TARGET === 'all') {
            await instance?.update({
              url: localUrl(config.HOST, listening.port),
              database_url: database.url,
            });
            await announceStandalone(pool, clock, publicUrl, adminToken!, config, database, logFormat);
          }
        },
        async stop() {
          const open = [server, adminServer].filter((s): s is Server => s !== undefined);
          await Promise.all(open.map(closeServer));
        },
        ready: () =>
          server?.listening === true && (adminPort === undefined || adminServer?.listening === true),
      },
    ],
    logger,
  );
  await runUntilSignal(runner, logger);
}

/** One service's modules and routes, built from the process's infrastructure. */
function serviceParts(service: Service, infrastructure: Infrastructure): ServiceParts {
  const { config, logger, pool, databaseUrl, store, bus, clock } = infrastructure;
  const shared = { pool, connectionString: databaseUrl, store, bus, logger, clock };
  switch (service) {
    case 'auth': {
      const adminToken = infrastructure.adminToken;
      if (!adminToken) throw new Error('ADMIN_TOKEN is required with TARGET=auth');
      const auth = createAuthService({
        pool,
        store,
        logger,
        clock,
        settings: {
          publicUrl: infrastructure.publicUrl,
          adminToken,
          rateLimit: rateLimitOf(config),
          failedAuthentication: {
            capacity: config.CLIENT_AUTH_FAILURES_PER_MINUTE,
            refillPerSecond: config.CLIENT_AUTH_FAILURES_PER_MINUTE / 60,
          },
          refreshTokenTtlSeconds: config.REFRESH_TOKEN_TTL_SECONDS,
        },
        metrics: authMetrics(infrastructure.metrics),
      });
      return { modules: auth.modules, routes: auth.routes, adminRoutes: auth.adminRoutes };
    }
    case 'api': {
      const api = createApiService({
        ...shared,
        gate: infrastructure.gate(),
        readYourWritesTimeoutMs: config.READ_YOUR_WRITES_TIMEOUT_MS,
        eventTypes: eventCatalog(),
        metrics: infrastructure.metrics,
      });
      // The relay publishes the event store's outbox to Kafka; it runs where the api runs.
      const relay = infrastructure.kafka
        ? [
            new OutboxRelay(infrastructure.kafka, store, logger, {
              connectionString: databaseUrl,
              topics: topicsOf(config),
              batchSize: 500,
              pollIntervalMs: 500,
            }),
          ]
        : [];
      return { modules: [...api.modules, ...relay], routes: api.routes };
    }
    case 'projector':
      return { modules: [createProjectorModule({ pool, bus, logger })], routes: [] };
    case 'webhook-dispatcher': {
      const dispatcher = createWebhookDispatcher({
        ...shared,
        gate: infrastructure.gate(),
        metrics: infrastructure.metrics,
        ...webhookDispatcherSettings(config),
      });
      return dispatcher;
    }
    default: {
      const unhandled: never = service;
      throw new Error(`unhandled service ${String(unhandled)}`);
    }
  }
}

/**
 * Bearer-token verification for the services that serve `/v2`: the auth service's JWKS, a deny-list
 * fed by revocation announcements (its own module, ready once subscribed), and the per-client rate
 * limit.
 */
function tokenVerification(infrastructure: Omit<Infrastructure, 'gate'>): {
  gate: BearerGate;
  module: Module;
} {
  const { config, clock, logger, bus } = infrastructure;
  const denyList = new RevocationDenyList(clock);
  const keys = createJwksKeySource({
    url: `${config.AUTH_URL ?? `http://127.0.0.1:${config.PORT}`}/.well-known/jwks.json`,
    clock,
    logger,
  });
  const verifier = createTokenVerifier({
    issuer: issuerFromPublicUrl(infrastructure.publicUrl),
    keys,
    denyList,
    clock,
  });
  return {
    gate: new BearerGate(
      verifier,
      new TokenBucketLimiter(rateLimitOf(config), clock),
      authMetrics(infrastructure.metrics),
    ),
    module: {
      ...revocationsModule(bus, denyList, `revocations-${config.TARGET}-${hostname()}`),
      dependsOn: ['database'],
    },
  };
}

function rateLimitOf(config: PlatformConfig) {
  return { capacity: config.RATE_LIMIT_CAPACITY, refillPerSecond: config.RATE_LIMIT_REFILL_PER_SECOND };
}

function topicsOf(config: PlatformConfig): TopicSettings {
  return {
    prefix: config.KAFKA_TOPIC_PREFIX,
    partitions: config.KAFKA_TOPIC_PARTITIONS,
    replicationFactor: config.KAFKA_REPLICATION_FACTOR,
    create: config.KAFKA_CREATE_TOPICS,
  };
}

function platformTopics(config: PlatformConfig): string[] {
  return platformStreamTypes().map((streamType) => topicOf(topicsOf(config), streamType));
}

/** The database: DATABASE_URL, or (standalone) an embedded Postgres kept in DATA_DIR. */
async function openDatabase(
  config: PlatformConfig,
  logger: Logger,
): Promise<{ url: string; location?: string; down?: () => boolean; stop: () => Promise<void> }> {
  if (config.DATABASE_URL) return { url: config.DATABASE_URL, stop: async () => {} };
  return startEmbeddedPostgres({
    dataDir: resolve(config.DATA_DIR, 'postgres'),
    port: config.EMBEDDED_POSTGRES_PORT,
    logger,
    settings: { dataDir: 'DATA_DIR', port: 'EMBEDDED_POSTGRES_PORT' },
    // It died and could not be started again: exit, so that a supervisor starts the platform anew.
    onLost(error) {
      logger.fatal({ err: error }, 'the embedded Postgres is lost; exiting');
      process.exit(1);
    },
  });
}

/** Where this machine reaches a process listening on `host`. */
function localUrl(host: string, port: number): string {
  const address = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return `http://${address}:${port}`;
}

async function migrateAll(pool: Pool, logger: Logger): Promise<void> {
  await migrateEventStore(pool, logger);
  await migrateAuth(pool, logger);
  await migrateApi(pool, logger);
  await migrateWebhookDispatcher(pool, logger);
}

async function migrateOwn(target: Service, pool: Pool, logger: Logger): Promise<void> {
  switch (target) {
    case 'auth':
      await migrateEventStore(pool, logger);
      return migrateAuth(pool, logger);
    case 'api':
      await migrateEventStore(pool, logger);
      return migrateApi(pool, logger);
    case 'projector':
      return migrateEventStore(pool, logger);
    case 'webhook-dispatcher':
      await migrateEventStore(pool, logger);
      return migrateWebhookDispatcher(pool, logger);
    default: {
      const unhandled: never = target;
      throw new Error(`unhandled target ${String(unhandled)}`);
    }
  }
}

/** Standalone without ADMIN_TOKEN: one generated on first start, kept in DATA_DIR so it survives restarts. */
async function standaloneAdminToken(dataDir: string): Promise<string> {
  const file = join(resolve(dataDir), STANDALONE_FILES.adminToken);
  if (existsSync(file)) return (await readFile(file, 'utf8')).trim();
  await mkdir(resolve(dataDir), { recursive: true });
  const token = randomBytes(24).toString('base64url');
  await writeFile(file, `${token}\n`, { mode: 0o600 });
  return token;
}

/** Standalone: the demo organization and client, and how to use them, printed once the port is open. */
async function announceStandalone(
  pool: Pool,
  clock: () => Date,
  publicUrl: string,
  adminToken: string,
  config: PlatformConfig,
  database: { location?: string },
  format: LogFormat,
): Promise<void> {
  const demo: DemoTenant = await ensureDemoTenant({ pool, clock });
  const basic = Buffer.from(`${demo.clientId}:${demo.clientSecret}`).toString('base64');
  const lines = [
    '',
    `Order-fulfillment platform (standalone) listening on ${publicUrl}`,
    `  data:          ${config.DATABASE_URL ? 'DATABASE_URL' : resolve(config.DATA_DIR)}`,
    ...(database.location && database.location !== resolve(config.DATA_DIR, 'postgres')
      ? [`  postgres:      ${database.location} (linked from DATA_DIR/postgres)`]
      : []),
    `  admin token:   ${adminToken}${config.ADMIN_TOKEN ? ' (from ADMIN_TOKEN)' : ' (generated; kept in DATA_DIR/admin-token)'}`,
    `  organization:  ${demo.organization.name} (id ${demo.organization.id})`,
    `  client_id:     ${demo.clientId}`,
    `  client_secret: ${demo.clientSecret}`,
    `  scopes:        ${demo.scopes.join(' ')}`,
    '',
    'Try it:',
    `  TOKEN=$(curl -s -X POST ${publicUrl}/oauth/token -H 'Authorization: Basic ${basic}' -d grant_type=client_credentials | sed -E 's/.*"access_token":"([^"]+)".*/\\1/')`,
    `  curl -s ${publicUrl}/v2/authenticate -H "Authorization: Bearer $TOKEN"`,
    '',
    '',
  ];
  // One write, apart from the log lines: on stdout among readable logs, on stderr beside JSON ones
  // so that stdout stays one JSON object per line.
  (format === 'pretty' ? process.stdout : process.stderr).write(lines.join('\n'));
}
