import type { Bus, Subscription } from '@ofp/bus';
import type { Logger, Module, Pool } from '@ofp/runtime';
import { inTransaction } from '@ofp/runtime';
import { PROJECTED_STREAM_TYPES, PROJECTION_CHANNEL, PROJECTION_LOCK, applyEvents } from './projection.js';
import { READ_SCHEMA, createReadSchema } from './read-schema.js';

export interface ProjectorDependencies {
  readonly pool: Pool;
  readonly bus: Bus;
  readonly logger: Logger;
}

/** The consumer group of the read-model projection. */
export const PROJECTOR_GROUP = 'projector';

/**
 * The projector service: consumes every model's events and keeps the read schema's typed tables
 * current. Each batch, its checkpoint rows and the progress notification commit in one transaction.
 */
export function createProjectorModule(deps: ProjectorDependencies): Module {
  let subscription: Subscription | undefined;
  return {
    name: 'projector',
    async start() {
      await inTransaction(deps.pool, async (client) => {
        // Two processes starting together must not race on CREATE TABLE IF NOT EXISTS.
        await client.query(`SELECT pg_advisory_xact_lock(${PROJECTION_LOCK})`);
        await createReadSchema(client, READ_SCHEMA);
      });
      subscription = await deps.bus.subscribe({
        group: PROJECTOR_GROUP,
        streamTypes: PROJECTED_STREAM_TYPES,
        handle: (events) =>
          inTransaction(deps.pool, async (client) => {
            await client.query(`SELECT pg_advisory_xact_lock_shared(${PROJECTION_LOCK})`);
            const applied = await applyEvents(client, READ_SCHEMA, events);
            if (applied > 0) await client.query(`SELECT pg_notify('${PROJECTION_CHANNEL}', '')`);
          }),
      });
    },
    async stop() {
      await subscription?.stop();
      subscription = undefined;
    },
    ready: () => subscription !== undefined,
  };
}
