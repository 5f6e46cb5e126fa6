import { z } from 'zod';
import { env } from '@ofp/runtime';
import type { WorkerLimits } from './delivery/delivery-workers.js';

/** Every limit of the dispatcher; the defaults are the contract's (API.md §8) or the deployment's. */
export interface DeliveryLimits extends WorkerLimits {
  /** The issue's connect timeout: 5 s. */
  readonly connectTimeoutMs: number;
  /** API.md §8: success is a 2xx within 15 s, connect included. */
  readonly requestTimeoutMs: number;
  /** How much of a response body an attempt keeps (the registry's `response_excerpt` holds 2000 characters). */
  readonly maxExcerptBytes: number;
  /** Days a finished delivery (and its attempts) is kept; at least `recover`'s 14 days (API.md §8). */
  readonly retentionDays: number;
}

/** `recover` reaches 14 days back (API.md §8): finished deliveries are kept at least that long. */
export const MIN_RETENTION_DAYS = 14;

export const DEFAULT_LIMITS: DeliveryLimits = {
  concurrency: 64,
  claimAhead: 64,
  endpointConcurrency: 16,
  pollIntervalMs: 1000,
  leaseMs: 10 * 60_000,
  reapIntervalMs: 10_000,
  connectTimeoutMs: 5_000,
  requestTimeoutMs: 15_000,
  maxExcerptBytes: 1024,
  retentionDays: 30,
};

/**
 * The dispatcher's environment variables, for the platform's config schema (`z.object({...shape})`):
 *
 * - `WEBHOOK_ALLOW_PRIVATE_TARGETS` (false): any target address, and plain `http` (API.md §8; local runs, tests);
 * - `WEBHOOK_ALLOWED_NETWORKS` (none): comma-separated CIDR blocks allowed although not public;
 * - `WEBHOOK_WORKER_CONCURRENCY` (64): deliveries in flight per process;
 * - `WEBHOOK_ENDPOINT_CONCURRENCY` (16): deliveries in flight per endpoint, across processes (below the workers');
 * - `WEBHOOK_POLL_INTERVAL_MS` (1000): how often idle workers look for retries that fell due;
 * - `WEBHOOK_DELIVERY_RETENTION_DAYS` (30, at least 14): how long finished deliveries (payloads included) are kept.
 */
export const webhookDispatcherConfigShape = {
  WEBHOOK_ALLOW_PRIVATE_TARGETS: env.boolean(false).meta({
    description: 'allow webhook URLs on private/loopback addresses and plain `http` (local runs, tests)',
  }),
  WEBHOOK_ALLOWED_NETWORKS: env.list().optional().meta({
    description: 'comma-separated CIDR blocks allowed as webhook targets although not public',
  }),
  WEBHOOK_WORKER_CONCURRENCY: env
    .positiveInt(DEFAULT_LIMITS.concurrency)
    .meta({ description: 'deliveries in flight per process' }),
  WEBHOOK_ENDPOINT_CONCURRENCY: env.positiveInt(DEFAULT_LIMITS.endpointConcurrency).meta({
    description:
      "deliveries of one endpoint claimed at once, across processes; below `WEBHOOK_WORKER_CONCURRENCY`, so that a slow endpoint leaves workers to the others (a rate per second is the webhook's own rate_limit)",
  }),
  WEBHOOK_POLL_INTERVAL_MS: env
    .positiveInt(DEFAULT_LIMITS.pollIntervalMs)
    .meta({ description: 'how often idle delivery workers look for retries that fell due' }),
  WEBHOOK_DELIVERY_RETENTION_DAYS: env
    .positiveInt(DEFAULT_LIMITS.retentionDays)
    .pipe(z.number().min(MIN_RETENTION_DAYS, `must be at least ${MIN_RETENTION_DAYS} (recover’s reach)`))
    .meta({
      description: `days a finished delivery, its attempts and its payload are kept (at least ${MIN_RETENTION_DAYS}, what \`recover\` reaches); purged hourly`,
    }),
};

type WebhookDispatcherConfig = z.infer<z.ZodObject<typeof webhookDispatcherConfigShape>>;

/**
 * What is wrong with the dispatcher settings taken together, each naming its setting: an endpoint
 * allowed as many deliveries at once as a process has workers could, when slow, hold every worker of
 * that process while other endpoints' deliveries wait.
 */
export function webhookDispatcherSettingsIssues(
  config: Pick<WebhookDispatcherConfig, 'WEBHOOK_WORKER_CONCURRENCY' | 'WEBHOOK_ENDPOINT_CONCURRENCY'>,
): { setting: string; message: string }[] {
  const { WEBHOOK_WORKER_CONCURRENCY: workers, WEBHOOK_ENDPOINT_CONCURRENCY: perEndpoint } = config;
  return perEndpoint < workers
    ? []
    : [
        {
          setting: 'WEBHOOK_ENDPOINT_CONCURRENCY',
          message: `(${perEndpoint}) must be below WEBHOOK_WORKER_CONCURRENCY (${workers}): one slow endpoint would hold every delivery worker of a process and the other endpoints' deliveries would wait`,
        },
      ];
}

/** The dispatcher settings of a parsed config, for `createWebhookDispatcher`'s dependencies (module.ts). */
export function webhookDispatcherSettings(config: WebhookDispatcherConfig): {
  allowPrivateTargets: boolean;
  allowedNetworks: readonly string[];
  limits: Partial<DeliveryLimits>;
} {
  return {
    allowPrivateTargets: config.WEBHOOK_ALLOW_PRIVATE_TARGETS,
    allowedNetworks: config.WEBHOOK_ALLOWED_NETWORKS ?? [],
    limits: {
      concurrency: config.WEBHOOK_WORKER_CONCURRENCY,
      endpointConcurrency: config.WEBHOOK_ENDPOINT_CONCURRENCY,
      pollIntervalMs: config.WEBHOOK_POLL_INTERVAL_MS,
      retentionDays: config.WEBHOOK_DELIVERY_RETENTION_DAYS,
    },
  };
}
