import { fileURLToPath } from 'node:url';
import { Registry } from 'prom-client';
import type { BearerGate } from '@ofp/auth-tokens';
import { consumerModule, type Bus, type Parking } from '@ofp/bus';
import type { EventStore } from '@ofp/event-store';
import {
  checkSealedColumn,
  declareSealedColumns,
  migrate,
  resealColumn,
  schemaTransaction,
  type Logger,
  type Module,
  type Pool,
  type PostgresSession,
  type SecretsKeyring,
} from '@ofp/runtime';
import { IdempotencyStore, PUBLIC, bindRoutes, type Route, type RouteSpec } from '@ofp/http-api';
import { DEFAULT_LIMITS, type DeliveryLimits } from './config.js';
import { AddressGuard, systemResolver, type HostResolver } from './delivery/address-guard.js';
import { DeliveryMetrics } from './delivery/delivery-metrics.js';
import { DeliveryQueue } from './delivery/delivery-queue.js';
import { DeliveryWorkers } from './delivery/delivery-workers.js';
import { EndpointDisabler } from './delivery/endpoint-disabler.js';
import { EventIntake, INTAKE_GROUP, intakeStreamTypes } from './delivery/event-intake.js';
import { FailureAnnouncer } from './delivery/failure-announcer.js';
import { HttpSender } from './delivery/http-sender.js';
import { webhookOperations, webhookRouteSpecs } from './http/routes.js';
import { portalPageOperations, portalPageRouteSpecs } from './portal/portal-page.js';
import { PORTAL_OPERATIONS, PortalSessions } from './portal/portal-sessions.js';
import { ENDPOINT_SECRETS_SEALED, layOutTables } from './schema.js';
import { SubscriberCache } from './subscriptions/subscribers.js';
import { UrlPolicy } from './subscriptions/url-policy.js';
import { WebhookCommands } from './subscriptions/webhook-commands.js';

const MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));

/** How often expired idempotency keys, portal sessions and deliveries past the retention are deleted. */
const PURGE_INTERVAL_MS = 3_600_000;
/** Deliveries deleted per statement, so that a large purge never holds locks for long. */
const PURGE_BATCH = 10_000;

export interface WebhookDispatcherDependencies {
  readonly pool: Pool;
  /** The process's session: the workers' liveness lock and their LISTEN for due deliveries. */
  readonly session: PostgresSession;
  /** Where `webhook.*` events are appended. */
  readonly store: EventStore;
  /** Where every model's events come from (Kafka, or the Postgres-log bus standalone). */
  readonly bus: Bus;
  /** Parks an event the intake cannot take (API.md §12). */
  readonly parking?: Parking;
  readonly logger: Logger;
  readonly clock: () => Date;
  /**
   * The key-encryption keys of the secrets at rest (API.md §12): the endpoints' signing secrets and the
   * stored responses of idempotent writes, which hold a new secret after create and rotate_secret.
   */
  readonly secrets: SecretsKeyring;
  /** Bearer verification and the client's rate limit, on the dispatcher's routes. */
  readonly gate: BearerGate;
  /** The deployment's public base URL (`PUBLIC_URL`): where the portal sessions' links point. */
  readonly publicUrl: string;
  /** `WEBHOOK_ALLOW_PRIVATE_TARGETS`: any target address, and plain `http` (API.md §8). */
  readonly allowPrivateTargets: boolean;
  /** `WEBHOOK_ALLOWED_NETWORKS`: CIDR blocks allowed although not public. */
  readonly allowedNetworks?: readonly string[];
  /** Overrides of {@link DEFAULT_LIMITS}. */
  readonly limits?: Partial<DeliveryLimits>;
  /** Where the metrics go; a registry of the module's own (`module.metrics`) when left out. */
  readonly metrics?: Registry;
  /** The retry jitter's randomness, a number in [0, 1) (Math.random when left out). */
  readonly random?: () => number;
  /** DNS for the SSRF guard (the system resolver when left out). */
  readonly resolveHost?: HostResolver;
}

/** What the delivery sender needs of the dispatcher's dependencies. */
export type DeliverySenderDependencies = Pick<
  WebhookDispatcherDependencies,
  'clock' | 'allowPrivateTargets' | 'allowedNetworks' | 'limits' | 'resolveHost'
>;

/**
 * The sender the workers deliver with: signed POSTs through the SSRF guard, with the connect and
 * request timeouts and the per-endpoint connection limit (the benchmark measures it on its own too).
 */
export function createDeliverySender(deps: DeliverySenderDependencies): HttpSender {
  const limits: DeliveryLimits = { ...DEFAULT_LIMITS, ...deps.limits };
  return new HttpSender({
    guard: addressGuardOf(deps),
    resolve: deps.resolveHost ?? systemResolver,
    clock: deps.clock,
    connectTimeoutMs: limits.connectTimeoutMs,
    requestTimeoutMs: limits.requestTimeoutMs,
    connectionsPerOrigin: limits.endpointConcurrency,
    maxExcerptBytes: limits.maxExcerptBytes,
  });
}

function addressGuardOf(deps: DeliverySenderDependencies): AddressGuard {
  return new AddressGuard({
    allowPrivateTargets: deps.allowPrivateTargets,
    allowedNetworks: deps.allowedNetworks ?? [],
  });
}

/** The webhook dispatcher: its modules and its part of the route table. */
export interface WebhookDispatcherService {
  /** The workers, the disabler, the failure announcer and the purge. */
  readonly delivery: Module;
  /** The bus consumer that queues the deliveries: started after {@link delivery}. */
  readonly intake: Module;
  /** `/v2/webhooks*`, `/v2/webhook_deliveries*` and the subscriber portal's page, `/portal`. */
  readonly routes: readonly Route[];
  /** The registry holding the dispatcher's metrics. */
  readonly metrics: Registry;
}

/** The dispatcher's part of the route table: the webhooks API and the portal's page. */
export function dispatcherRouteSpecs(): RouteSpec[] {
  return [...webhookRouteSpecs(), ...portalPageRouteSpecs()];
}

const idempotencyTable = (pool: Pool, secrets?: SecretsKeyring) =>
  new IdempotencyStore(pool, 'webhooks.idempotency_keys', secrets);

/**
 * Lays out schema `webhooks` (the declared tables, then the migrations, then the idempotency keys).
 * Idempotent; run at every start, like the projector's read schema, so that declared fields appear
 * as columns.
 */
export async function migrateWebhookDispatcher(pool: Pool, logger: Logger): Promise<void> {
  await schemaTransaction(pool, layOutTables);
  await migrate(pool, { component: 'webhook-dispatcher', directory: MIGRATIONS, logger });
  await schemaTransaction(pool, (client) => idempotencyTable(pool).layOut(client));
}

/**
 * The webhook dispatcher (API.md §8): the `webhooks` and `webhook_deliveries` endpoints, the bus
 * consumer that queues one durable delivery per event and subscribed endpoint, and the workers that
 * send them signed, retry, keep per-record order, and disable endpoints that are gone. Its modules
 * need {@link migrateWebhookDispatcher} to have run; the routes work without them.
 */
export function createWebhookDispatcher(deps: WebhookDispatcherDependencies): WebhookDispatcherService {
  const limits: DeliveryLimits = { ...DEFAULT_LIMITS, ...deps.limits };
  const logger = deps.logger.child({ module: 'webhook-dispatcher' });
  const resolve = deps.resolveHost ?? systemResolver;
  const guard = addressGuardOf(deps);
  const queue = new DeliveryQueue(deps.pool, deps.secrets);
  const commands = new WebhookCommands(
    deps.pool,
    deps.store,
    queue,
    new UrlPolicy(guard, resolve),
    deps.clock,
    deps.secrets,
  );
  const metrics = deps.metrics ?? new Registry();
  const deliveryMetrics = new DeliveryMetrics(metrics, () => queue.depth(deps.clock()));
  const disabler = new EndpointDisabler(deps.pool, commands, logger, deliveryMetrics);
  const announcer = new FailureAnnouncer(deps.pool, queue, deps.clock, logger);
  const sender = createDeliverySender(deps);
  const workers = new DeliveryWorkers({
    session: deps.session,
    queue,
    sender,
    metrics: deliveryMetrics,
    onDisableRequested: () => disabler.request(),
    onGivenUp: () => announcer.request(),
    clock: deps.clock,
    random: deps.random ?? Math.random,
    logger,
    limits,
  });
  const subscribers = new SubscriberCache(deps.pool, deps.session);
  const intake = new EventIntake(subscribers, queue, deps.clock);
  const idempotency = idempotencyTable(deps.pool, deps.secrets);
  const sessions = new PortalSessions(deps.pool, deps.clock);
  const sealed = [...ENDPOINT_SECRETS_SEALED, idempotency.sealedBodies];
  let started = false;
  let sweep: NodeJS.Timeout | undefined;
  let purge: NodeJS.Timeout | undefined;
  /** Idempotency keys past their 24 h, expired portal sessions, and deliveries finished longer ago than the retention. */
  async function purgeExpired(): Promise<void> {
    await idempotency.purgeExpired();
    await sessions.purgeExpired(deps.clock());
    const before = new Date(deps.clock().getTime() - limits.retentionDays * 86_400_000);
    let purged = 0;
    for (;;) {
      const batch = await queue.purgeFinished(before, PURGE_BATCH);
      purged += batch;
      if (batch < PURGE_BATCH) break;
    }
    if (purged > 0) logger.info({ deliveries: purged, before }, 'purged finished webhook deliveries');
  }
  const delivery: Module = {
    name: 'webhook-delivery',
    async start() {
      // A wrong key stops the start with one line; secrets stored in clear (before they were sealed)
      // or under a key being rotated out are sealed under the current key.
      await declareSealedColumns(deps.pool, sealed);
      for (const column of sealed) await checkSealedColumn(deps.pool, deps.secrets, column);
      for (const column of sealed) {
        const { resealed, unopened } = await resealColumn(deps.pool, deps.secrets, column);
        if (resealed > 0)
          logger.info(
            { resealed, column: `${column.table}.${column.column}` },
            `sealed ${resealed} stored secrets`,
          );
        for (const secret of unopened)
          logger.error(
            secret,
            `a stored secret does not open: ${secret.column} ${secret.row}: ${secret.reason}`,
          );
      }
      await workers.start();
      // Disables and failures to tell that a process which died left behind, and any that failed:
      // looked at again regularly.
      disabler.request();
      announcer.request();
      sweep = setInterval(() => {
        disabler.request();
        announcer.request();
      }, limits.reapIntervalMs);
      sweep.unref();
      purge = setInterval(() => {
        purgeExpired().catch((error: unknown) =>
          logger.warn({ err: error }, 'purging expired records failed'),
        );
      }, PURGE_INTERVAL_MS);
      purge.unref();
      started = true;
    },
    async stop() {
      started = false;
      clearInterval(sweep);
      clearInterval(purge);
      await workers.stop();
      await disabler.idle();
      await announcer.idle();
      await sender.close();
    },
    ready: () => started,
  };
  const intakeModule = consumerModule(deps.bus, {
    name: 'webhook-intake',
    parking: deps.parking,
    prepare: () => subscribers.start(),
    subscriptions: [
      { group: INTAKE_GROUP, streamTypes: intakeStreamTypes(), handle: (events) => intake.handle(events) },
    ],
  });
  return {
    delivery,
    intake: intakeModule,
    routes: bindRoutes(
      dispatcherRouteSpecs(),
      {
        ...webhookOperations({ pool: deps.pool, commands, sessions, publicUrl: deps.publicUrl }),
        ...portalPageOperations(),
      },
      // A portal session's token is taken on these routes alone: with `write` on the portal's calls,
      // `read` only on the others.
      (access, spec) =>
        access.kind === 'public'
          ? PUBLIC
          : deps.gate.access(
              access.scopes ?? [],
              undefined,
              PORTAL_OPERATIONS.has(spec.operationId) ? sessions : sessions.readOnly,
            ),
      idempotency,
    ),
    metrics,
  };
}
