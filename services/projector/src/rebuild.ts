import { START, type EventStore, type GlobalPosition } from '@ofp/event-store';
import { inTransaction, type Pool } from '@ofp/runtime';
import { MODELS, PROJECTION_CHANNEL, PROJECTION_LOCK, READ_SCHEMA, createReadSchema } from '@ofp/models';
import { PROJECTED_STREAM_TYPES, applyEvents } from './projection.js';

const NEXT_SCHEMA = 'read_rebuild';
const REPLACED_SCHEMA = 'read_replaced';
const BATCH = 2000;

export interface RebuildProgress {
  /** Called with the number of events replayed so far and the total at the start. */
  (done: number, total: number): void;
}

/**
 * Replays the event store into fresh read tables and swaps them in: readers keep the old tables
 * until one transaction renames the schemas, so they never see a gap. The swap waits for the live
 * projector's batch in flight (advisory lock) and replays what arrived meanwhile first.
 */
export async function rebuildReadModel(
  pool: Pool,
  store: EventStore,
  progress: RebuildProgress,
): Promise<{ events: number }> {
  const replayed = await replayReadModel(pool, store, NEXT_SCHEMA, progress);
  let { position, events: done } = replayed;
  await inTransaction(pool, async (client) => {
    await client.query(`SELECT pg_advisory_xact_lock(${PROJECTION_LOCK})`);
    for (;;) {
      const { events, through } = await store.readAll(position, {
        limit: BATCH,
        streamTypes: PROJECTED_STREAM_TYPES,
      });
      if (through === undefined) break;
      await applyEvents(client, NEXT_SCHEMA, events);
      position = through;
      done += events.length;
    }
    await client.query(`ALTER SCHEMA ${READ_SCHEMA} RENAME TO ${REPLACED_SCHEMA}`);
    await client.query(`ALTER SCHEMA ${NEXT_SCHEMA} RENAME TO ${READ_SCHEMA}`);
    await client.query(`SELECT pg_notify('${PROJECTION_CHANNEL}', '')`);
  });
  progress(done, Math.max(replayed.total, done));
  await pool.query(`DROP SCHEMA ${REPLACED_SCHEMA} CASCADE`);
  return { events: done };
}

/**
 * Replays the whole event store into fresh read tables in `schema` (dropped first, if it exists),
 * batch by batch, and resolves with the position it reached. The read model in use is not touched:
 * the chaos run compares such a replay with it, table by table.
 */
export async function replayReadModel(
  pool: Pool,
  store: EventStore,
  schema: string,
  progress: RebuildProgress,
): Promise<{ events: number; total: number; position: GlobalPosition }> {
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await inTransaction(pool, (client) => createReadSchema(client, schema, Object.values(MODELS)));
  const { rows } = await pool.query<{ total: number }>(
    'SELECT count(*)::int AS total FROM es.events WHERE stream_type = ANY($1::text[])',
    [PROJECTED_STREAM_TYPES],
  );
  const total = rows[0]?.total ?? 0;
  let position: GlobalPosition = START;
  let done = 0;
  progress(done, total);
  for (;;) {
    const { events, through } = await store.readAll(position, {
      limit: BATCH,
      streamTypes: PROJECTED_STREAM_TYPES,
    });
    if (through === undefined) break;
    await inTransaction(pool, (client) => applyEvents(client, schema, events));
    position = through;
    done += events.length;
    progress(done, Math.max(total, done));
  }
  return { events: done, total, position };
}
