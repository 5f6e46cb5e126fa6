import { consumerModule, type Bus, type Parking } from '@ofp/bus';
import { MODELS, PROJECTION_LOCK, READ_SCHEMA, createReadSchema, progressNotification } from '@ofp/models';
import { inTransaction, type Logger, type Module, type Pool } from '@ofp/runtime';
import { PROJECTED_STREAM_TYPES, applyEvents, projectedStreams } from './projection.js';

export interface ProjectorDependencies {
  readonly pool: Pool;
  readonly bus: Bus;
  readonly logger: Logger;
  /** Parks an event the read model cannot take, so that it stops no other record (API.md §12). */
  readonly parking?: Parking;
}

/** The consumer group of the read-model projection. */
export const PROJECTOR_GROUP = 'projector';

/**
 * The projector service: consumes every model's events and keeps the read schema's typed tables
 * current (the read model's contract: `@ofp/models` read-model). Each batch, its checkpoint rows and
 * the progress notification commit in one transaction.
 */
export function createProjectorModule(deps: ProjectorDependencies): Module {
  return consumerModule(deps.bus, {
    name: 'projector',
    parking: deps.parking,
    prepare: () =>
      inTransaction(deps.pool, async (client) => {
        // Two processes starting together must not race on CREATE TABLE IF NOT EXISTS.
        await client.query(`SELECT pg_advisory_xact_lock(${PROJECTION_LOCK})`);
        await createReadSchema(client, READ_SCHEMA, Object.values(MODELS));
      }),
    subscriptions: [
      {
        group: PROJECTOR_GROUP,
        streamTypes: PROJECTED_STREAM_TYPES,
        handle: (events) =>
          inTransaction(deps.pool, (client) => applyEvents(client, READ_SCHEMA, events), {
            first: `SELECT pg_advisory_xact_lock_shared(${PROJECTION_LOCK})`,
            // Read-your-writes waiters for these streams are released without a look (a stream whose
            // event was applied before, and skipped, is at least at that version too).
            last: progressNotification(projectedStreams(events)),
          }),
      },
    ],
  });
}
