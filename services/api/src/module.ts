import { fileURLToPath } from 'node:url';
import type { Registry } from 'prom-client';
import type { AuthContext, BearerGate } from '@ofp/auth-tokens';
import type { Bus, Parking } from '@ofp/bus';
import type { EventStore } from '@ofp/event-store';
import {
  migrate,
  schemaTransaction,
  type Logger,
  type Module,
  type Pool,
  type PostgresSession,
} from '@ofp/runtime';
import { IdempotencyStore, bindRoutes, type Route, type RouteSpec } from '@ofp/http-api';

import { RecordCommands } from './commands/record-commands.js';
import { RecordStore } from './commands/record-store.js';
import { ReferenceResolver } from './commands/references.js';
import { UniqueValues } from './commands/unique-values.js';
import { eventFeedOperations, eventFeedRouteSpec, type PublishedEventType } from './http/event-feed-route.js';
import { apiOperations, apiRouteSpecs } from './http/routes.js';
import { INVENTORY_MANAGER, InventoryManager } from './process-managers/inventory-manager.js';
import { ORDER_PROGRESS_MANAGER, OrderProgressManager } from './process-managers/order-progress-manager.js';
import {
  processManagerGroup,
  processManagersModule,
  type ProcessManagerSubscription,
} from './process-managers/process-manager.js';
import { EventFeed } from './queries/event-feed.js';
import { ReadYourWrites } from './queries/read-your-writes.js';
import { RecordQueries } from './queries/record-queries.js';
import { TenantSeeder } from './tenant-seeder.js';

/**
 * The consumer groups of the process managers the api runs ({@link createApiService}, in the same
 * order), and the stream types each reads: who reads what, known without starting the api (the chaos
 * run counts a group's lag on topics it has committed nothing on from it).
 */
export const PROCESS_MANAGER_SUBSCRIPTIONS: readonly { group: string; streamTypes: readonly string[] }[] = (
  [ORDER_PROGRESS_MANAGER, INVENTORY_MANAGER] satisfies ProcessManagerSubscription[]
).map(({ name, streamTypes }) => ({ group: processManagerGroup(name), streamTypes }));

const MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));

/**
 * Longest a read waits for its organization's writes that were answered before the read model showed
 * them (API.md §5), before its 503; never past the read's database deadline (API.md §3's 5 s).
 */
const READ_CATCH_UP_MS = 2_000;

/** How often expired idempotency keys are deleted. */
const PURGE_INTERVAL_MS = 3_600_000;

export interface ApiDependencies {
  readonly pool: Pool;
  /** The process's session: read-your-writes listens for progress on it. */
  readonly session: PostgresSession;
  readonly store: EventStore;
  /** Where the process managers read the events they react to. */
  readonly bus: Bus;
  /** Parks an event a process manager cannot apply (API.md §12). */
  readonly parking?: Parking;
  readonly logger: Logger;
  readonly clock: () => Date;
  /** Bearer verification and rate limit, which every request passes first. */
  readonly gate: BearerGate;
  /** Longest a write's response waits for the read model (API.md §5 read-your-writes). */
  readonly readYourWritesTimeoutMs: number;
  /** Every event type the platform publishes, with its body's schema: what the events feed serves. */
  readonly eventTypes: readonly PublishedEventType[];
  /** The process's metrics registry (read-your-writes waits); none in tests. */
  readonly metrics?: Registry;
}

/** The api service: its modules and its part of the route table. */
export interface ApiService {
  /** Read-your-writes and the idempotency purge. */
  readonly api: Module;
  /** The process managers (order progress, inventory) as bus consumers. */
  readonly processManagers: Module;
  /** The `/v2` model endpoints. */
  readonly routes: readonly Route[];
}

const idempotencyTable = (pool: Pool) => new IdempotencyStore(pool, 'api.idempotency_keys');

export async function migrateApi(pool: Pool, logger: Logger): Promise<void> {
  await migrate(pool, { component: 'api', directory: MIGRATIONS, logger });
  await schemaTransaction(pool, (client) => idempotencyTable(pool).layOut(client));
}

/** The api's routes as data: every model's, and the events feed over the published event types. */
export function apiServiceRouteSpecs(eventTypes: readonly PublishedEventType[]): RouteSpec[] {
  return [...apiRouteSpecs(), eventFeedRouteSpec(eventTypes)];
}

/**
 * The api service: commands onto the event store, queries from the read model, and the process
 * managers (order progress, inventory), which issue commands onto the same event store and so run
 * where the api runs.
 */
export function createApiService(deps: ApiDependencies): ApiService {
  const records = new RecordStore(deps.pool, deps.store);
  const unique = new UniqueValues(deps.pool);
  const idempotency = idempotencyTable(deps.pool);
  const commands = new RecordCommands(
    deps.store,
    records,
    new ReferenceResolver(records, unique),
    unique,
    deps.clock,
  );
  const processManagers = [
    new OrderProgressManager(deps.pool, deps.store, records, deps.clock),
    new InventoryManager(deps.pool, deps.store, records, unique, deps.clock),
  ];
  const readYourWrites = new ReadYourWrites(
    deps.pool,
    deps.store,
    processManagers,
    deps.session,
    deps.logger,
    { timeoutMs: deps.readYourWritesTimeoutMs, readTimeoutMs: READ_CATCH_UP_MS, pollIntervalMs: 50 },
    deps.metrics,
  );
  const tenants = new TenantSeeder(deps.pool, commands, unique, readYourWrites);
  let started = false;
  let purge: NodeJS.Timeout | undefined;
  const api: Module = {
    name: 'api',
    async start() {
      await readYourWrites.start();
      purge = setInterval(() => {
        idempotency
          .purgeExpired()
          .catch((error: unknown) => deps.logger.warn({ err: error }, 'idempotency purge failed'));
      }, PURGE_INTERVAL_MS);
      purge.unref();
      started = true;
    },
    async stop() {
      started = false;
      clearInterval(purge);
      await readYourWrites.stop();
    },
    ready: () => started,
  };
  const seed = (auth: AuthContext) => tenants.ensureSeeded(auth.orgId);
  return {
    api,
    processManagers: processManagersModule(deps.bus, processManagers, deps.logger, deps.parking),
    routes: bindRoutes(
      apiServiceRouteSpecs(deps.eventTypes),
      {
        ...apiOperations({
          commands,
          queries: new RecordQueries(deps.pool, (orgId) => readYourWrites.catchUp(orgId)),
          readYourWrites,
        }),
        ...eventFeedOperations({ feed: new EventFeed(deps.store, deps.clock), eventTypes: deps.eventTypes }),
      },
      // Every organization has its seed records (phone number types) before its first request is served.
      (access) => deps.gate.access(access.scopes ?? [], seed),
      idempotency,
    ),
  };
}
