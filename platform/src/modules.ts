import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import type { Registry } from 'prom-client';
import { createApiService, migrateApi, type ApiService } from '@ofp/api';
import { createAuthService, ensureDemoTenant, migrateAuth, type AuthService } from '@ofp/auth';
import {
  BearerGate,
  authMetrics,
  RevocationDenyList,
  TokenBucketLimiter,
  createJwksKeySource,
  createTokenVerifier,
  DpopProofVerifier,
  issuerFromPublicUrl,
  revocationSubscription,
  type JwksKeySource,
} from '@ofp/auth-tokens';
import {
  KafkaBus,
  OutboxRelay,
  Parking,
  PgLogBus,
  checkKafka,
  consumerModule,
  createKafkaClient,
  KafkaStatistics,
  kafkaBrokerCheck,
  topicOf,
  type Bus,
  type KafkaClient,
  type TopicSettings,
} from '@ofp/bus';
import { EventStore, LOG_READER_SETTINGS, ParkedEvents, migrateEventStore } from '@ofp/event-store';
import { createProjectorModule } from '@ofp/projector';
import {
  createDependencyHealth,
  createMetricsRegistry,
  createPool,
  loadSecretsKeyring,
  secretsKeyFileWatch,
  postgresCheck,
  standaloneSecretsKeyFile,
  PostgresSession,
  type DatabaseTimeouts,
  type LogFormat,
  type Logger,
  type ModuleDefinition,
  type ModuleDefinitions,
  type ModulePart,
  type Pool,
  type SecretsKeyring,
} from '@ofp/runtime';
import { closeServer, createHttpApp, listen, type Route } from '@ofp/http-api';
import { STANDALONE_FILES, startEmbeddedPostgres, type InstanceLock } from '@ofp/standalone';
import { telemetryModule } from '@ofp/runtime/telemetry';
import { warmUp } from './warm-up.js';
import {
  createWebhookDispatcher,
  eventCatalog,
  migrateWebhookDispatcher,
  webhookDispatcherSettings,
  type WebhookDispatcherService,
} from '@ofp/webhook-dispatcher';
import type { PlatformConfig, Target } from './config.js';
import { servedDescriptions } from './descriptions.js';
import {
  registerFlowMetrics,
  registerKafkaClientMetrics,
  registerOutboxMetrics,
  registerParkingMetrics,
} from './observability.js';
import { preflight } from './preflight.js';
import { runbookRoutes } from './runbooks.js';
import { dataSchemaOf, platformStreamTypes } from './streams.js';

/** What every module is given, besides the values of the modules it depends on. */
export interface PlatformContext {
  readonly config: PlatformConfig;
  readonly logger: Logger;
  readonly logFormat: LogFormat;
  readonly clock: () => Date;
  /** Flushes the OpenTelemetry SDK, which `main.ts` started before anything was imported. */
  readonly shutdownTelemetry: () => Promise<void>;
  /** Whether the whole process is ready (`/readyz`): every module of its graph started and ready. */
  readonly ready: () => boolean;
}

/** The database: DATABASE_URL, or (standalone) an embedded Postgres kept in DATA_DIR. */
export interface Database {
  readonly url: string;
  /** Where the embedded cluster lies, when it is not under DATA_DIR (as root). */
  readonly location?: string;
  /** Whether the embedded Postgres's watchdog knows it to be down. */
  readonly down?: () => boolean;
}

/** A listening HTTP server: where this machine reaches it. */
export interface Listener {
  readonly url: () => string;
}

/**
 * What each module gives the modules that depend on it (`undefined`: a lifecycle only). The module
 * names are this interface's keys.
 */
export interface Provided {
  telemetry: undefined;
  /** DATA_DIR's instance lock (standalone), held until the process stops. */
  preflight: InstanceLock | undefined;
  /** The process's Kafka client (undefined without KAFKA_BROKERS). */
  kafka: KafkaClient | undefined;
  database: Database;
  pool: Pool;
  /**
   * The process's Postgres session: LISTEN and session-level advisory locks on one connection that
   * comes back by itself after any loss (connected on first use).
   */
  'postgres-session': PostgresSession;
  /** The process's one metrics registry. */
  metrics: Registry;
  /** Readiness: 503 while Postgres, or Kafka where the process uses it, does not answer (API.md §3). */
  health: undefined;
  /** The event store, its schema migrated. */
  'event-store': EventStore;
  'auth-schema': undefined;
  'api-schema': undefined;
  'webhooks-schema': undefined;
  /** Kafka with KAFKA_BROKERS, else the Postgres log. */
  bus: Bus;
  /** Parked events (API.md §12) of the process's consumer groups: projector, process managers, webhook intake. */
  parking: Parking;
  /**
   * Bearer verification for `/v2` (`gate`), its deny-list fed by the revocation announcements, and the
   * issuer's published keys it verifies with.
   */
  'token-verification': { gate: BearerGate; keys: JwksKeySource; keysUrl: string };
  /** The admin API's bearer token: ADMIN_TOKEN, or (standalone) one generated and kept in DATA_DIR. */
  'admin-token': string;
  /**
   * The key-encryption keys of the secrets at rest (API.md §12): SECRETS_KEY_FILE, or (standalone) a
   * file generated and kept in DATA_DIR.
   */
  'secrets-keys': SecretsKeyring;
  auth: AuthService;
  /** Purges the auth service's expired codes, grants and refresh tokens. */
  'auth-janitor': undefined;
  api: ApiService;
  'process-managers': undefined;
  'outbox-relay': undefined;
  projector: undefined;
  webhooks: WebhookDispatcherService;
  'webhook-intake': undefined;
  /** `/openapi.json`, `/asyncapi.json`, `/docs` (every process serves the whole platform's) and `/docs/runbooks`. */
  descriptions: readonly Route[];
  /** The public listener (PORT). */
  http: Listener;
  /** The admin API's own listener (ADMIN_PORT), where the target has one. */
  'admin-http': Listener;
  /**
   * Readiness waits for it: the pool's connections open and the token issuer's keys fetched, before the
   * first requests need them (bounded).
   */
  'warm-up': undefined;
  /** The standalone instance announced: DATA_DIR's instance file, the demo tenant, the banner. */
  standalone: undefined;
}

export type ModuleName = keyof Provided;

/** One module: `init` is given the values of exactly its `deps` (and of its `optional` ones present). */
function module<
  const D extends ModuleName = never,
  const O extends ModuleName = never,
  R = ModulePart<undefined>,
>(
  definition: Omit<ModuleDefinition<Provided, PlatformContext, unknown, D, O>, 'init'> & {
    init(given: NoInfer<PlatformContext & Pick<Provided, D> & Partial<Pick<Provided, O>>>): R | Promise<R>;
  },
) {
  return definition;
}

const modules = {
  telemetry: module({ deps: [], init: ({ shutdownTelemetry }) => telemetryModule(shutdownTelemetry) }),

  // What a person can get wrong in the settings is found before anything is created.
  preflight: module({
    deps: ['telemetry'],
    init: async ({ config }) => {
      const lock = await preflight(config);
      return { value: lock, stop: async () => lock?.release() };
    },
  }),

  // The auth service appends to the outbox and never talks to Kafka (the api's relay publishes).
  kafka: module({
    deps: ['preflight', 'metrics'],
    init: async ({ config, logger, metrics }) => {
      if (!config.KAFKA_BROKERS) return { value: undefined };
      const statistics = new KafkaStatistics();
      registerKafkaClientMetrics(metrics, statistics);
      const client = await createKafkaClient(
        config,
        `${config.KAFKA_CLIENT_ID}-${config.TARGET}`,
        logger,
        statistics,
      );
      await checkKafka(
        client,
        platformStreamTypes().map((streamType) => topicOf(topicsOf(config), streamType)),
      );
      return { value: client };
    },
  }),

  // Kafka's settings are checked before the database is opened, where the target uses Kafka.
  database: module({
    deps: ['preflight'],
    optional: ['kafka'],
    init: async ({ config, logger }) => {
      if (config.DATABASE_URL) return { value: { url: config.DATABASE_URL } };
      const embedded = await startEmbeddedPostgres({
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
      return { value: embedded, stop: () => embedded.stop() };
    },
  }),

  pool: module({
    deps: ['database'],
    // The migrate target has no metrics; the services' pools export theirs.
    optional: ['metrics'],
    init: ({ config, database, metrics }) => {
      const pool = createPool({
        connectionString: database.url,
        applicationName: `ofp-${config.TARGET}`,
        max: config.DATABASE_POOL_SIZE,
        timeouts: databaseTimeouts(config),
        ...(metrics && { metrics }),
      });
      return { value: pool, stop: () => pool.end() };
    },
  }),

  'postgres-session': module({
    deps: ['database', 'metrics'],
    init: ({ config, logger, database, metrics }) => {
      const session = new PostgresSession({
        connectionString: database.url,
        applicationName: `ofp-${config.TARGET}-session`,
        logger,
        metrics,
      });
      return { value: session, stop: () => session.stop() };
    },
  }),

  metrics: module({
    deps: [],
    init: ({ config }) => ({ value: createMetricsRegistry(`ofp-${config.TARGET}`) }),
  }),

  // Readiness (API.md §3): 503 while Postgres, or the Kafka the process uses, does not answer.
  health: module({
    deps: ['database', 'metrics'],
    optional: ['kafka'],
    init: ({ config, database, logger, metrics, kafka }) =>
      createDependencyHealth({
        checks: [
          postgresCheck(database.url, { knownDown: () => database.down?.() === true }),
          ...(kafka ? [kafkaBrokerCheck(kafka.kafka, config.KAFKA_BROKERS ?? [])] : []),
        ],
        logger,
        metrics,
      }),
  }),

  'event-store': module({
    deps: ['pool'],
    init: ({ config, pool, logger }) => ({
      // Outbox rows are written in every process of a Kafka deployment (the api's relay publishes what
      // any service appended, the auth service's revocations included); standalone reads the log itself.
      value: new EventStore(pool, { outbox: config.KAFKA_BROKERS !== undefined || config.TARGET !== 'all' }),
      start: () => migrateEventStore(pool, logger),
    }),
  }),
  'auth-schema': module({
    deps: ['pool'],
    init: ({ pool, logger }) => ({ start: () => migrateAuth(pool, logger) }),
  }),
  'api-schema': module({
    deps: ['pool'],
    init: ({ pool, logger }) => ({ start: () => migrateApi(pool, logger) }),
  }),
  'webhooks-schema': module({
    deps: ['pool'],
    init: ({ pool, logger }) => ({ start: () => migrateWebhookDispatcher(pool, logger) }),
  }),

  bus: module({
    deps: ['kafka', 'database', 'event-store', 'metrics', 'postgres-session'],
    init: ({ config, logger, kafka, database, metrics, ...given }) => {
      if (kafka) {
        const bus = new KafkaBus(kafka.kafka, logger, {
          topics: topicsOf(config),
          batchSize: 500,
          sessionTimeoutMs: config.KAFKA_SESSION_TIMEOUT_MS,
          ...(config.KAFKA_GROUP_INSTANCE_ID ? { instanceId: config.KAFKA_GROUP_INSTANCE_ID } : {}),
        });
        registerFlowMetrics(metrics, bus);
        return { value: bus, stop: () => bus.close() };
      }
      // The standalone bus's consumers read the log with one statement for which Postgres kept choosing
      // a custom plan: about 100 µs of planning per read, two reads per write (pg_stat_statements).
      // Their own small pool plans it once, walking the log's index (LOG_READER_SETTINGS).
      const readers = createPool({
        connectionString: database.url,
        applicationName: `ofp-${config.TARGET}-bus`,
        max: 4,
        genericPlans: true,
        settings: LOG_READER_SETTINGS,
        timeouts: databaseTimeouts(config),
        metrics,
      });
      const log = new EventStore(readers, { outbox: false });
      const bus = new PgLogBus(readers, given['postgres-session'], log, logger, {
        batchSize: 500,
        pollIntervalMs: 1000,
      });
      registerFlowMetrics(metrics, bus);
      return {
        value: bus,
        async stop() {
          await bus.close();
          await readers.end();
        },
      };
    },
  }),

  'token-verification': module({
    deps: ['bus', 'metrics'],
    init: ({ config, clock, logger, bus, metrics }) => {
      const denyList = new RevocationDenyList(clock);
      const keysUrl = `${config.AUTH_URL ?? `http://127.0.0.1:${config.PORT}`}/.well-known/jwks.json`;
      const keys = createJwksKeySource({ url: keysUrl, logger });
      const verifier = createTokenVerifier({
        issuer: issuerFromPublicUrl(publicUrlOf(config)),
        keys,
        denyList,
        clock,
      });
      const gate = new BearerGate(
        verifier,
        new TokenBucketLimiter(rateLimitOf(config), clock),
        authMetrics(metrics),
        // Each process remembers the DPoP proofs it accepted (docs/auth.md).
        {
          publicUrl: publicUrlOf(config),
          proofs: new DpopProofVerifier(clock, config.DPOP_NONCE_SECRET),
        },
        denyList,
      );
      return {
        value: { gate, keys, keysUrl },
        ...consumerModule(bus, {
          name: 'revocations',
          subscriptions: [revocationSubscription(denyList, `revocations-${config.TARGET}-${hostname()}`)],
        }),
      };
    },
  }),

  'admin-token': module({
    deps: ['preflight'],
    init: async ({ config }) => ({
      value: config.ADMIN_TOKEN ?? (await standaloneAdminToken(config.DATA_DIR)),
    }),
  }),

  // After the database: a start that fails before it leaves DATA_DIR as it was (no key generated).
  // The file is read again while the process runs: rotating the key needs no restart (docs/secrets.md).
  'secrets-keys': module({
    deps: ['preflight', 'database', 'pool', 'metrics'],
    init: async ({ config, logger, pool, metrics }) => {
      const file = config.SECRETS_KEY_FILE ?? (await standaloneSecretsKeyFile(config.DATA_DIR));
      const keyring = await loadSecretsKeyring(file, 'SECRETS_KEY_FILE');
      const watch = secretsKeyFileWatch({
        pool,
        keyring,
        file,
        setting: 'SECRETS_KEY_FILE',
        name: config.TARGET,
        logger,
        metrics,
      });
      return { value: keyring, start: watch.start, stop: watch.stop };
    },
  }),

  auth: module({
    deps: ['auth-schema', 'event-store', 'pool', 'metrics', 'admin-token', 'secrets-keys'],
    init: ({ config, logger, clock, pool, metrics, ...given }) => {
      const auth = createAuthService({
        pool,
        store: given['event-store'],
        logger,
        clock,
        settings: {
          publicUrl: publicUrlOf(config),
          adminToken: given['admin-token'],
          rateLimit: rateLimitOf(config),
          failedAuthentication: {
            capacity: config.CLIENT_AUTH_FAILURES_PER_MINUTE,
            refillPerSecond: config.CLIENT_AUTH_FAILURES_PER_MINUTE / 60,
          },
          refreshTokenTtlSeconds: config.REFRESH_TOKEN_TTL_SECONDS,
          ...(config.DPOP_NONCE_SECRET === undefined ? {} : { dpopNonceSecret: config.DPOP_NONCE_SECRET }),
        },
        secrets: given['secrets-keys'],
        metrics: authMetrics(metrics),
      });
      return { value: auth, ...auth.module };
    },
  }),
  'auth-janitor': module({ deps: ['auth'], init: ({ auth }) => auth.janitor }),

  api: module({
    deps: [
      'api-schema',
      'event-store',
      'pool',
      'postgres-session',
      'bus',
      'parking',
      'token-verification',
      'metrics',
    ],
    init: ({ config, logger, clock, pool, bus, parking, metrics, ...given }) => {
      const api = createApiService({
        pool,
        parking,
        session: given['postgres-session'],
        store: given['event-store'],
        bus,
        logger,
        clock,
        gate: given['token-verification'].gate,
        readYourWritesTimeoutMs: config.READ_YOUR_WRITES_TIMEOUT_MS,
        eventTypes: eventCatalog(),
        metrics,
      });
      return { value: api, ...api.api };
    },
  }),
  'process-managers': module({ deps: ['api'], init: ({ api }) => api.processManagers }),

  // The relay publishes the event store's outbox to Kafka; it runs where the api runs.
  'outbox-relay': module({
    deps: ['kafka', 'event-store', 'postgres-session', 'metrics'],
    init: ({ config, logger, kafka, metrics, ...given }) => {
      if (!kafka) return {};
      const store = given['event-store'];
      const relay = new OutboxRelay(kafka.kafka, store, logger, {
        session: given['postgres-session'],
        topics: topicsOf(config),
        batchSize: 500,
        pollIntervalMs: 500,
        dataSchemaOf,
      });
      registerOutboxMetrics(metrics, store, relay);
      return relay;
    },
  }),

  parking: module({
    deps: ['event-store', 'pool', 'postgres-session', 'metrics'],
    init: ({ pool, logger, metrics, ...given }) => {
      const parked = new ParkedEvents(pool);
      registerParkingMetrics(metrics, parked);
      const parking = new Parking({
        parked,
        store: given['event-store'],
        pool,
        session: given['postgres-session'],
        logger,
      });
      return { value: parking, stop: () => parking.close() };
    },
  }),

  projector: module({
    deps: ['bus', 'pool', 'parking'],
    init: ({ pool, bus, logger, parking }) => createProjectorModule({ pool, bus, logger, parking }),
  }),

  webhooks: module({
    deps: [
      'webhooks-schema',
      'event-store',
      'pool',
      'postgres-session',
      'bus',
      'parking',
      'token-verification',
      'metrics',
      'secrets-keys',
    ],
    init: ({ config, logger, clock, pool, bus, parking, metrics, ...given }) => {
      const dispatcher = createWebhookDispatcher({
        secrets: given['secrets-keys'],
        pool,
        parking,
        session: given['postgres-session'],
        store: given['event-store'],
        bus,
        logger,
        clock,
        gate: given['token-verification'].gate,
        publicUrl: publicUrlOf(config),
        metrics,
        ...webhookDispatcherSettings(config),
      });
      return { value: dispatcher, ...dispatcher.delivery };
    },
  }),
  'webhook-intake': module({ deps: ['webhooks'], init: ({ webhooks }) => webhooks.intake }),

  descriptions: module({
    deps: [],
    init: async ({ config }) => ({
      value: [
        ...(await servedDescriptions({
          publicUrl: publicUrlOf(config),
          topicPrefix: config.KAFKA_TOPIC_PREFIX,
        })),
        ...(await runbookRoutes()),
      ],
    }),
  }),

  // The admin API is for operators: the distributed auth service serves it on a port of its own, which
  // the chart exposes inside the cluster only (API.md §10).
  'admin-http': module({
    deps: ['auth', 'metrics'],
    init: ({ config, logger, ready, auth, metrics }) =>
      listener(
        {
          logger,
          metrics,
          ready,
          routes: auth.adminRoutes,
          trustedProxyHops: config.TRUSTED_PROXY_HOPS,
          databaseDeadlineMs: config.DATABASE_REQUEST_DEADLINE_MS,
        },
        config.ADMIN_PORT,
        config.HOST,
        (port) => logger.info({ port }, `admin API listening on port ${port}`),
      ),
  }),

  // The listener opens once what it serves is up, and closes first. Standalone, where no admin
  // listener runs, the admin API is on PORT too.
  http: module({
    deps: ['health', 'metrics', 'descriptions'],
    optional: ['auth', 'api', 'webhooks', 'admin-http'],
    init: ({ config, logger, ready, metrics, descriptions, auth, api, webhooks, ...given }) => {
      const routes = [
        ...(auth?.routes ?? []),
        ...(auth && !given['admin-http'] ? auth.adminRoutes : []),
        ...(api?.routes ?? []),
        ...(webhooks?.routes ?? []),
        ...descriptions,
      ];
      return listener(
        {
          logger,
          metrics,
          ready,
          routes,
          trustedProxyHops: config.TRUSTED_PROXY_HOPS,
          databaseDeadlineMs: config.DATABASE_REQUEST_DEADLINE_MS,
        },
        config.PORT,
        config.HOST,
        (port) =>
          logger.info(
            { port, target: config.TARGET, public_url: publicUrlOf(config) },
            `listening on ${publicUrlOf(config)}`,
          ),
      );
    },
  }),

  // After the listener: standalone, the issuer whose keys it fetches is this process.
  'warm-up': module({
    deps: ['http', 'pool'],
    optional: ['token-verification'],
    init: ({ config, logger, pool, ...given }) => ({
      start: () =>
        warmUp({
          pool,
          connections: config.DATABASE_POOL_SIZE,
          keys: given['token-verification']?.keys,
          keysUrl: given['token-verification']?.keysUrl,
          logger,
        }),
    }),
  }),

  standalone: module({
    deps: ['http', 'preflight', 'database', 'pool', 'admin-token'],
    init: ({ config, clock, logFormat, http, preflight, database, pool, ...given }) => ({
      async start() {
        await preflight?.update({ url: http.url(), database_url: database.url });
        await announceStandalone(pool, clock, given['admin-token'], config, database, logFormat);
      },
    }),
  }),
};

/**
 * Every module of the platform and what it needs (compare Grafana Loki's `pkg/loki/modules.go`). A
 * process runs the graph of its target ({@link TARGETS}): those modules and what they need,
 * dependencies first, stopped in reverse; nothing else is built. `npm run describe -- --modules`
 * prints each target's graph. (Declared apart and checked here: a `satisfies` on the literal would
 * widen each module's dependencies to every module, and `init` could then use any.)
 */
export const MODULES: ModuleDefinitions<Provided, PlatformContext> = modules;

/**
 * The modules each TARGET runs (with what they need). `all` is the standalone mode: every service in
 * one process; `migrate` applies every schema's migrations and exits (the Helm hook Job).
 */
export const TARGETS = {
  all: [
    'auth',
    'auth-janitor',
    'api',
    'process-managers',
    'outbox-relay',
    'projector',
    'webhooks',
    'webhook-intake',
    'http',
    'warm-up',
    'standalone',
  ],
  auth: ['auth', 'auth-janitor', 'admin-http', 'http', 'warm-up'],
  api: ['api', 'process-managers', 'outbox-relay', 'http', 'warm-up'],
  projector: ['projector', 'http', 'warm-up'],
  'webhook-dispatcher': ['webhooks', 'webhook-intake', 'http', 'warm-up'],
  migrate: ['event-store', 'auth-schema', 'api-schema', 'webhooks-schema'],
} as const satisfies Record<Target, readonly ModuleName[]>;

/** An HTTP listener as a module: the app built at init, listening from start, closed at stop. */
function listener(
  app: Parameters<typeof createHttpApp>[0],
  port: number,
  host: string,
  announce: (port: number) => void,
): ModulePart<Listener> {
  const handler = createHttpApp(app);
  let server: Server | undefined;
  let url: string | undefined;
  return {
    value: {
      url: () => {
        if (url === undefined) throw new Error('the listener has not started');
        return url;
      },
    },
    async start() {
      const listening = await listen(handler, port, host);
      server = listening.server;
      url = localUrl(host, listening.port);
      announce(listening.port);
    },
    stop: async () => {
      if (server) await closeServer(server);
    },
    ready: () => server?.listening === true,
  };
}

/** The public base URL: the OAuth issuer (API.md §7). */
function publicUrlOf(config: PlatformConfig): string {
  return config.PUBLIC_URL ?? `http://localhost:${config.PORT}`;
}

/** How long the database may take (API.md §3, §12): the pools' server and client timeouts. */
function databaseTimeouts(config: PlatformConfig): DatabaseTimeouts {
  return {
    statementMs: config.DATABASE_STATEMENT_TIMEOUT_MS,
    lockMs: config.DATABASE_LOCK_TIMEOUT_MS,
    idleInTransactionMs: config.DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS,
    connectMs: config.DATABASE_CONNECT_TIMEOUT_MS,
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

/** Where this machine reaches a process listening on `host`. */
function localUrl(host: string, port: number): string {
  const address = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return `http://${address}:${port}`;
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
  adminToken: string,
  config: PlatformConfig,
  database: Database,
  format: LogFormat,
): Promise<void> {
  const publicUrl = publicUrlOf(config);
  const demo = await ensureDemoTenant({ pool, clock });
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
