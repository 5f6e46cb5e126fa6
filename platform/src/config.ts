import { z } from 'zod';
import { kafkaConfigShape, kafkaSettingsIssues } from '@ofp/bus';
import { env } from '@ofp/runtime';
import { webhookDispatcherConfigShape, webhookDispatcherSettingsIssues } from '@ofp/webhook-dispatcher';

/** `all` is the standalone mode; `migrate` applies every service's migrations and exits (the Helm hook Job). */
export const TARGET_NAMES = ['all', 'auth', 'api', 'projector', 'webhook-dispatcher', 'migrate'] as const;
export type Target = (typeof TARGET_NAMES)[number];

/** OpenTelemetry's own variable choosing one signal's exporter, read by the SDK: listed here to be documented. */
function otelExporter(signal: 'traces' | 'metrics' | 'logs') {
  return z
    .string()
    .optional()
    .meta({
      description: `with \`OTEL_EXPORTER_OTLP_ENDPOINT\`: \`none\` stops exporting the ${signal} (read by the OpenTelemetry SDK)`,
      whenUnset: '`otlp`',
    });
}

/**
 * Every setting of the platform process (docs/configuration.md). Standalone mode (TARGET=all, no
 * KAFKA_BROKERS) needs none of them; the distributed mode needs DATABASE_URL and KAFKA_BROKERS.
 */
export const platformConfigSchema = z
  .object({
    TARGET: z
      .enum(TARGET_NAMES)
      .default('all')
      .meta({ description: TARGET_NAMES.map((t) => `\`${t}\``).join(', ') }),
    PORT: env.port(8080).meta({ description: 'where the process listens' }),
    HOST: z.string().default('0.0.0.0').meta({ description: 'the address the process listens on' }),
    ADMIN_PORT: env.port(8081).meta({
      description:
        '`TARGET=auth`: where the admin API (`/admin`, API.md §10) listens, apart from `PORT`, which does not serve it; the chart exposes it inside the cluster only. Standalone serves it on `PORT`',
    }),
    DATA_DIR: z.string().default('./.data').meta({
      description:
        'standalone: the embedded Postgres cluster (or, as root, the link to it, see [operations](operations.md), "Starting") and its password, the generated admin token, and `instance.json`, which tells that an instance runs there and where (for `orderctl`, `rebuild-projections` and a second start)',
    }),
    DATABASE_URL: env.url().optional().meta({
      description: 'Postgres to use instead of the embedded one (required unless `TARGET=all`)',
    }),
    EMBEDDED_POSTGRES_PORT: env.port(5433).meta({ description: 'loopback port of the embedded Postgres' }),
    AUTH_URL: env.url().optional().meta({
      description:
        "where api and webhook-dispatcher fetch the auth service's JWKS (required with those targets)",
      whenUnset: 'this process',
    }),
    RATE_LIMIT_CAPACITY: env.positiveInt(600).meta({
      description:
        "per-client token bucket of the public API (API.md §3, 429), per process: its size (the chart divides the deployment's rate by the replicas: [scaling](scaling.md))",
    }),
    RATE_LIMIT_REFILL_PER_SECOND: z.coerce
      .number()
      .positive()
      .default(100)
      .meta({ description: 'per-client token bucket: tokens added per second' }),
    REFRESH_TOKEN_TTL_SECONDS: env
      .positiveInt(30 * 24 * 3600)
      .meta({ description: "an unused refresh token's lifetime" }),
    CLIENT_AUTH_FAILURES_PER_MINUTE: env.positiveInt(20).meta({
      description:
        "failed client authentications at `/oauth/*` per source address and per `client_id`, per process, a minute's worth as a burst; beyond it 429 `slow_down` with `Retry-After` (API.md §12, [auth](auth.md))",
    }),
    TRUSTED_PROXY_HOPS: z.coerce.number().int().min(0).max(10).default(0).meta({
      description:
        "reverse proxies in front that append to `X-Forwarded-For` (the chart sets 1 with its Ingress): a request's source address is the one the nearest of them saw",
    }),
    PUBLIC_URL: env.url().optional().meta({
      description: 'the public base URL; the OAuth issuer',
      whenUnset: '`http://localhost:<PORT>`',
    }),
    ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional().meta({
      description: 'bearer token of the admin API, at least 16 characters (required with `TARGET=auth`)',
      whenUnset: 'generated (standalone)',
    }),
    DPOP_NONCE_SECRET: z.string().min(32, 'must be at least 32 characters').optional().meta({
      description:
        'when set, every DPoP proof must carry a server nonce (RFC 9449 §8-9: `DPoP-Nonce`, `use_dpop_nonce`), the HMAC of the current minute under this secret: set the same value in every process ([auth](auth.md))',
      whenUnset: 'DPoP proofs need no nonce',
    }),
    SECRETS_KEY_FILE: z.string().min(1).optional().meta({
      description:
        'the key-encryption keys of the secrets at rest (signing keys, webhook secrets; API.md §12): a file of `<key id> <base64 of 32 bytes>` lines, the first seals, every one opens ([secrets](secrets.md)); required with `TARGET=auth` and `webhook-dispatcher`',
      whenUnset: 'standalone: `DATA_DIR/secrets-key`, generated 0600 on first start',
    }),
    ...kafkaConfigShape,
    DATABASE_POOL_SIZE: env.positiveInt(10).meta({
      description:
        "connections per process (more than a few per Postgres core only adds contention); standalone, the bus's readers have 4 more of their own",
    }),
    // How long the database may take (API.md §3, §12: while it hangs, requests answer 503 within 5 s).
    DATABASE_STATEMENT_TIMEOUT_MS: env.positiveInt(30_000).meta({
      description:
        'the server cancels a statement that runs longer (`statement_timeout`); the client gives up 2 s later, taking a silent server for hung, and drops the connection',
    }),
    DATABASE_LOCK_TIMEOUT_MS: env.positiveInt(5_000).meta({
      description: 'a statement that waits longer for a lock fails (`lock_timeout`)',
    }),
    DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS: env.positiveInt(10_000).meta({
      description:
        'the server ends a session idle in a transaction longer (`idle_in_transaction_session_timeout`): a frozen process holding locks lets go',
    }),
    DATABASE_CONNECT_TIMEOUT_MS: env.positiveInt(3_000).meta({
      description: 'longest wait for a database connection, from the pool or a new one',
    }),
    DATABASE_REQUEST_DEADLINE_MS: env.positiveInt(3_000).meta({
      description:
        "a request's database statements must all be answered this long after it arrived (its body read), else it answers 503 with `Retry-After` (API.md §3: within 5 s, even while the database hangs); the client enforces it, since a stopped server cancels nothing",
    }),
    READ_YOUR_WRITES_TIMEOUT_MS: env.positiveInt(5000).meta({
      description:
        "longest a write's response waits for the read model; past it the write answers, and its organization's reads wait for it (at most 2 s, then 503 with `Retry-After`: [api-notes.md](api-notes.md), read-your-writes)",
    }),
    ...webhookDispatcherConfigShape,
    LOG_LEVEL: env
      .logLevel()
      .meta({ description: 'pino level; `warn` leaves out the access log (one line per request at `info`)' }),
    LOG_FORMAT: env.logFormat().meta({
      description: '`pretty`: lines for a person (pino-pretty); `json`: one JSON object per line',
      whenUnset: '`pretty` on a terminal, else `json`',
    }),
    OTEL_EXPORTER_OTLP_ENDPOINT: env.url().optional().meta({
      description:
        "when set, the OpenTelemetry NodeSDK exports traces, the instrumentations' metrics and the logs to this OTLP endpoint (`/v1/traces`, `/v1/metrics`, `/v1/logs` under it), over `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf`, `http/json` or `grpc`); unset, nothing is exported. The Prometheus metrics of `/metrics` are not part of it",
    }),
    OTEL_TRACES_EXPORTER: otelExporter('traces'),
    OTEL_METRICS_EXPORTER: otelExporter('metrics'),
    OTEL_LOGS_EXPORTER: otelExporter('logs'),
  })
  .superRefine((config, ctx) => {
    for (const { setting, message } of [
      ...kafkaSettingsIssues(config),
      ...webhookDispatcherSettingsIssues(config),
    ])
      ctx.addIssue({ code: 'custom', path: [setting], message });
    if (config.TARGET === 'auth' && config.ADMIN_PORT === config.PORT && config.PORT !== 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['ADMIN_PORT'],
        message: `must differ from PORT (${config.PORT}): the admin API has a port of its own with TARGET=auth`,
      });
    }
    if (config.TARGET === 'auth' && !config.ADMIN_TOKEN) {
      ctx.addIssue({ code: 'custom', path: ['ADMIN_TOKEN'], message: 'is required with TARGET=auth' });
    }
    if (['auth', 'webhook-dispatcher'].includes(config.TARGET) && !config.SECRETS_KEY_FILE) {
      ctx.addIssue({
        code: 'custom',
        path: ['SECRETS_KEY_FILE'],
        message: `is required with TARGET=${config.TARGET} (every replica needs the same keys)`,
      });
    }
    if (config.TARGET !== 'all' && !config.DATABASE_URL) {
      ctx.addIssue({
        code: 'custom',
        path: ['DATABASE_URL'],
        message: `is required with TARGET=${config.TARGET}`,
      });
    }
    if (['api', 'projector', 'webhook-dispatcher'].includes(config.TARGET) && !config.KAFKA_BROKERS) {
      ctx.addIssue({
        code: 'custom',
        path: ['KAFKA_BROKERS'],
        message: `is required with TARGET=${config.TARGET}`,
      });
    }
    if (['api', 'webhook-dispatcher'].includes(config.TARGET) && !config.AUTH_URL) {
      ctx.addIssue({
        code: 'custom',
        path: ['AUTH_URL'],
        message: `is required with TARGET=${config.TARGET}`,
      });
    }
  });

export type PlatformConfig = Readonly<z.infer<typeof platformConfigSchema>>;
