import { z } from 'zod';
import { kafkaConfigShape, kafkaSettingsIssues } from '@ofp/bus';
import { env } from '@ofp/runtime';
import { webhookDispatcherConfigShape } from '@ofp/webhook-dispatcher';

/** `all` is the standalone mode; `migrate` applies every service's migrations and exits (the Helm hook Job). */
export const TARGETS = ['all', 'auth', 'api', 'projector', 'webhook-dispatcher', 'migrate'] as const;
export type Target = (typeof TARGETS)[number];

/**
 * Every setting of the platform process (docs/configuration.md). Standalone mode (TARGET=all, no
 * KAFKA_BROKERS) needs none of them; the distributed mode needs DATABASE_URL and KAFKA_BROKERS.
 */
export const platformConfigSchema = z
  .object({
    TARGET: z.enum(TARGETS).default('all'),
    PORT: env.port(8080),
    HOST: z.string().default('0.0.0.0'),
    /** TARGET=auth: where the admin API listens, apart from the public port (API.md §10). */
    ADMIN_PORT: env.port(8081),
    DATA_DIR: z.string().default('./.data'),
    DATABASE_URL: env.url().optional(),
    /** Port of the embedded Postgres (standalone without DATABASE_URL). */
    EMBEDDED_POSTGRES_PORT: env.port(5433),
    /** Where api and webhook-dispatcher fetch the auth service's JWKS; default this process (TARGET=all). */
    AUTH_URL: env.url().optional(),
    /** Per-client token bucket of the public API (API.md §3 429). */
    RATE_LIMIT_CAPACITY: env.positiveInt(600),
    RATE_LIMIT_REFILL_PER_SECOND: z.coerce.number().positive().default(100),
    /** How long an unused refresh token stays usable. */
    REFRESH_TOKEN_TTL_SECONDS: env.positiveInt(30 * 24 * 3600),
    PUBLIC_URL: env.url().optional(),
    ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
    ...kafkaConfigShape,
    DATABASE_POOL_SIZE: env.positiveInt(10),
    /** Longest a write's response waits for the read model (read-your-writes). */
    READ_YOUR_WRITES_TIMEOUT_MS: env.positiveInt(5000),
    ...webhookDispatcherConfigShape,
    LOG_LEVEL: env.logLevel(),
    LOG_FORMAT: env.logFormat(),
  })
  .superRefine((config, ctx) => {
    for (const { setting, message } of kafkaSettingsIssues(config))
      ctx.addIssue({ code: 'custom', path: [setting], message });
    if (config.TARGET === 'auth' && config.ADMIN_PORT === config.PORT && config.PORT !== 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['ADMIN_PORT'],
        message: `must differ from PORT (${config.PORT}): the admin API has a port of its own with TARGET=auth`,
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
