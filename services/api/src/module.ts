import { fileURLToPath } from 'node:url';
import type { BearerGate } from '@ofp/auth-tokens';
import type { Bus } from '@ofp/bus';
import type { EventStore } from '@ofp/event-store';
import {
  IdempotencyStore,
  migrate,
  type FastRoutes,
  type Logger,
  type Module,
  type Pool,
} from '@ofp/runtime';

import { RecordCommands } from './commands/record-commands.js';
import { RecordStore } from './commands/record-store.js';
import { ReferenceResolver } from './commands/references.js';
import { TenantSeeder } from './commands/tenant-seeder.js';
import { UniqueValues } from './commands/unique-values.js';
import { readRoutes } from './http/reads.js';
import { apiRoutes } from './http/routes.js';
import { InventoryManager } from './process-managers/inventory-manager.js';
import { OrderProgressManager } from './process-managers/order-progress-manager.js';
import { processManagersModule } from './process-managers/process-manager.js';
import { ProjectionWaiter } from './queries/projection-waiter.js';
import { RecordQueries } from './queries/record-queries.js';

const MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));

export interface ApiDependencies {
  readonly pool: Pool;
  readonly connectionString: string;
  readonly store: EventStore;
  readonly logger: Logger;
  readonly clock: () => Date;
  /** Bearer verification and rate limit, which every request passes first. */
  readonly gate: BearerGate;
  /** Longest a write's response waits for the read model (API.md §5 read-your-writes). */
  readonly readYourWritesTimeoutMs: number;
}

export interface ApiModule extends Module {
  /** The `/v2` model endpoints but reads; mount under `/v2` and `/api/v2`. */
  readonly routes: ReturnType<typeof apiRoutes>;
  /** The reads, served ahead of express (`HttpAppOptions.fastRoutes`). */
  readonly reads: FastRoutes;
}

export interface ProcessManagersDependencies {
  readonly pool: Pool;
  readonly store: EventStore;
  readonly bus: Bus;
  readonly logger: Logger;
  readonly clock: () => Date;
}

/**
 * The api's process managers (order progress, inventory) as one module of bus consumers. Run it
 * wherever the api runs: they issue commands onto the api's event store.
 */
export function createProcessManagersModule(deps: ProcessManagersDependencies): Module {
  const records = new RecordStore(deps.pool, deps.store);
  const unique = new UniqueValues(deps.pool);
  return processManagersModule(
    deps.bus,
    [
      new OrderProgressManager(deps.pool, records, deps.clock),
      new InventoryManager(deps.pool, records, unique, deps.clock),
    ],
    deps.logger,
  );
}

export async function migrateApi(pool: Pool, logger: Logger): Promise<void> {
  await migrate(pool, { component: 'api', directory: MIGRATIONS, logger });
}

/** The api service: commands onto the event store, queries from the read model. */
export function createApiModule(deps: ApiDependencies): ApiModule {
  const records = new RecordStore(deps.pool, deps.store);
  const unique = new UniqueValues(deps.pool);
  const idempotency = new IdempotencyStore(deps.pool, 'api.idempotency_keys');
  const commands = new RecordCommands(
    records,
    new ReferenceResolver(records, unique),
    unique,
    idempotency,
    deps.clock,
  );
  const waiter = new ProjectionWaiter(deps.pool, deps.connectionString, deps.logger, {
    timeoutMs: deps.readYourWritesTimeoutMs,
    pollIntervalMs: 50,
  });
  const tenants = new TenantSeeder(deps.pool, commands, unique, waiter);
  const queries = new RecordQueries(deps.pool);
  let started = false;
  let purge: NodeJS.Timeout | undefined;
  return {
    name: 'api',
    routes: apiRoutes({ commands, waiter, idempotency, tenants, authenticate: deps.gate.middleware }),
    reads: readRoutes({ queries, tenants, gate: deps.gate }),
    async start() {
      await waiter.start();
      purge = setInterval(() => {
        idempotency
          .purgeExpired()
          .catch((error: unknown) => deps.logger.warn({ err: error }, 'idempotency purge failed'));
      }, 3_600_000);
      purge.unref();
      started = true;
    },
    async stop() {
      started = false;
      clearInterval(purge);
      await waiter.stop();
    },
    ready: () => started,
  };
}
