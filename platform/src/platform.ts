import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { createApiModule, createProcessManagersModule, migrateApi } from '@ofp/api';
import { createAuthModule, ensureDemoTenant, migrateAuth, type DemoTenant } from '@ofp/auth';
import {
  RevocationDenyList,
  TokenBucketLimiter,
  createJwksKeySource,
  createBusRevocationFeed,
  createRevocationModule,
  createTokenVerifier,
  issuerFromPublicUrl,
  BearerGate,
} from '@ofp/auth-tokens';
import { KafkaBus, OutboxRelay, PgLogBus, kafkaBrokerCheck, type Bus } from '@ofp/bus';
import { EventStore, migrateEventStore } from '@ofp/event-store';
import { createProjectorModule } from '@ofp/projector';
import {
  createWebhookDispatcherModule,
  migrateWebhookDispatcher,
  webhookDispatcherSettings,
} from '@ofp/webhook-dispatcher';
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
  type FastRoutes,
  type InstanceLock,
  type LogFormat,
  type Logger,
  type Module,
  type Pool,
} from '@ofp/runtime';
import type { Express } from 'express';
import { platformConfigSchema, type PlatformConfig, type Target } from './config.js';
import { preflight } from './preflight.js';

const includes = (target: Target, service: Exclude<Target, 'all' | 'migrate'>): boolean =>
  target === 'all' || target === service;

/**
 * The composition root of every process: TARGET names the service to run (the distributed shape,
 * one process per service), or `all` of them in one process on an embedded Postgres with the
 * Postgres-log bus (standalone), compare Grafana Loki/Mimir's `-target`.
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
  const instance = await preflight(config);
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
  const clock = (): Date => new Date();
  const kafka = config.KAFKA_BROKERS
    ? new Kafka({
        clientId: `${config.KAFKA_CLIENT_ID}-${config.TARGET}`,
        brokers: config.KAFKA_BROKERS,
        logLevel: logLevel.WARN,
      })
    : undefined;
  const topics = {
    prefix: config.KAFKA_TOPIC_PREFIX,
    partitions: config.KAFKA_TOPIC_PARTITIONS,
    replicationFactor: config.KAFKA_REPLICATION_FACTOR,
  };
  // Outbox rows are written in every process of a Kafka deployment (the api's relay publishes what
  // any service appended, the auth service's revocations included); standalone reads the log itself.
  const store = new EventStore(pool, { outbox: kafka !== undefined || target !== 'all' });
  const bus: Bus = kafka
    ? new KafkaBus(kafka, logger, { topics, batchSize: 500 })
    : new PgLogBus(pool, database.url, store, logger, { batchSize: 500, pollIntervalMs: 1000 });
  const publicUrl = config.PUBLIC_URL ?? `http://localhost:${config.PORT}`;
  const issuer = issuerFromPublicUrl(publicUrl);
  const adminToken =
    config.ADMIN_TOKEN ?? (config.TARGET === 'all' ? await standaloneAdminToken(config.DATA_DIR) : undefined);

  const modules: Module[] = [];
  const mounts: ((app: Express) => void)[] = [];
  let fastRoutes: FastRoutes | undefined;
  modules.push({
    name: 'database',
    start: () => (target === 'all' ? migrateAll(pool, logger) : migrateOwn(target, pool, logger)),
    async stop() {
      await pool.end();
      await database.stop();
      await shutdownTelemetry();
    },
    ready: () => true,
  });
  // Readiness (API.md §3): 503 while Postgres, or the Kafka a consumer reads, does not answer.
  modules.push(
    createDependencyHealth({
      checks: [
        postgresCheck(database.url),
        ...(kafka && target !== 'auth' ? [kafkaBrokerCheck(kafka, config.KAFKA_BROKERS ?? [])] : []),
      ],
      logger,
    }),
  );

  if (includes(config.TARGET, 'auth')) {
    if (!adminToken) throw new Error('ADMIN_TOKEN is required with TARGET=auth');
    const auth = createAuthModule({
      pool,
      store,
      logger,
      clock,
      settings: {
        publicUrl,
        adminToken,
        rateLimit: {
          capacity: config.RATE_LIMIT_CAPACITY,
          refillPerSecond: config.RATE_LIMIT_REFILL_PER_SECOND,
        },
        refreshTokenTtlSeconds: config.REFRESH_TOKEN_TTL_SECONDS,
      },
    });
    modules.push(auth);
    mounts.push((app) => auth.routes(app));
  }

  // Bearer-token verification for the services that serve /v2: JWKS from the auth service, the
  // deny-list fed by revocation announcements, and the per-client rate limit.
  // Made once, by the first service that needs it.
  let gate: BearerGate | undefined;
  const v2Gate = (): BearerGate => (gate ??= bearerGate());
  function bearerGate(): BearerGate {
    const denyList = new RevocationDenyList(clock);
    modules.push(
      createRevocationModule(
        createBusRevocationFeed({ bus, group: `revocations-${target}-${hostname()}` }),
        denyList,
      ),
    );
    const keys = createJwksKeySource({
      url: `${config.AUTH_URL ?? `http://127.0.0.1:${config.PORT}`}/.well-known/jwks.json`,
      clock,
      logger,
    });
    const verifier = createTokenVerifier({ issuer, keys, denyList, clock });
    const limiter = new TokenBucketLimiter(
      { capacity: config.RATE_LIMIT_CAPACITY, refillPerSecond: config.RATE_LIMIT_REFILL_PER_SECOND },
      clock,
    );
    return new BearerGate(verifier, limiter);
  }

  // Mounted before the api: it answers /v2/webhooks* and /v2/webhook_deliveries*, and lets the rest through.
  if (includes(target, 'webhook-dispatcher')) {
    const webhooks = createWebhookDispatcherModule({
      pool,
      connectionString: database.url,
      store,
      bus,
      logger,
      clock,
      authenticate: v2Gate().middleware,
      ...webhookDispatcherSettings(config),
    });
    modules.push(webhooks);
    mounts.push((app) => app.use(['/v2', '/api/v2'], webhooks.routes));
  }

  if (includes(target, 'api')) {
    const api = createApiModule({
      pool,
      connectionString: database.url,
      store,
      logger,
      clock,
      gate: v2Gate(),
      readYourWritesTimeoutMs: config.READ_YOUR_WRITES_TIMEOUT_MS,
    });
    modules.push(api);
    // The process managers issue commands onto the api's event store, so they run where the api runs.
    modules.push(createProcessManagersModule({ pool, store, bus, logger, clock }));
    mounts.push((app) => app.use(['/v2', '/api/v2'], api.routes));
    fastRoutes = api.reads;
    if (kafka)
      modules.push(
        relayModule(
          new OutboxRelay(kafka, store, logger, {
            connectionString: database.url,
            topics,
            batchSize: 500,
            pollIntervalMs: 500,
          }),
        ),
      );
  }

  if (includes(config.TARGET, 'projector')) modules.push(createProjectorModule({ pool, bus, logger }));

  let server: Server | undefined;
  const runner: ModuleRunner = new ModuleRunner(
    [
      ...modules,
      {
        name: 'http',
        async start() {
          const app = createHttpApp({
            logger,
            metrics: createMetricsRegistry(`ofp-${config.TARGET}`),
            ready: () => runner.ready(),
            routes: (routes) => mounts.forEach((mount) => mount(routes)),
            ...(fastRoutes ? { fastRoutes } : {}),
          });
          const listening = await listen(app, config.PORT, config.HOST);
          server = listening.server;
          logger.info(
            { port: listening.port, target: config.TARGET, public_url: publicUrl },
            `listening on ${publicUrl}`,
          );
          if (config.TARGET === 'all') {
            await instance?.update({
              url: localUrl(config.HOST, listening.port),
              database_url: database.url,
            });
            await announceStandalone(pool, clock, publicUrl, adminToken!, config, database, logFormat);
          }
        },
        async stop() {
          if (server) await closeServer(server);
        },
        ready: () => server?.listening === true,
      },
    ],
    logger,
  );
  await runUntilSignal(runner, logger);
}

function relayModule(relay: OutboxRelay): Module {
  let started = false;
  return {
    name: 'outbox-relay',
    async start() {
      await relay.start();
      started = true;
    },
    async stop() {
      started = false;
      await relay.stop();
    },
    ready: () => started,
  };
}

/** The database: DATABASE_URL, or (standalone) an embedded Postgres kept in DATA_DIR. */
async function openDatabase(
  config: PlatformConfig,
  logger: Logger,
): Promise<{ url: string; location?: string; stop: () => Promise<void> }> {
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

async function migrateOwn(
  target: Exclude<Target, 'all' | 'migrate'>,
  pool: Pool,
  logger: Logger,
): Promise<void> {
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
