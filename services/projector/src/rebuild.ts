import { reasonOf } from '@ofp/bus';
import {
  START,
  type EventStore,
  type GlobalPosition,
  type ParkedEvents,
  type StoredEvent,
} from '@ofp/event-store';
import { inTransaction, isDependencyDown, type Pool, type PoolClient } from '@ofp/runtime';
import { MODELS, PROJECTION_CHANNEL, PROJECTION_LOCK, READ_SCHEMA, createReadSchema } from '@ofp/models';
import { PROJECTOR_GROUP } from './module.js';
import { PROJECTED_STREAM_TYPES, applyEvents } from './projection.js';

const NEXT_SCHEMA = 'read_rebuild';
const REPLACED_SCHEMA = 'read_replaced';
const BATCH = 2000;

export interface RebuildProgress {
  /** Called with the number of events replayed so far and the total at the start. */
  (done: number, total: number): void;
}

/**
 * Where a replay puts an event it cannot apply (API.md §12): parked for the projector's consumer group,
 * as the live projector parks it, with the events of its stream after it waiting behind it; the
 * streams the projector already holds are held in the replay too. Without it, such an event stops the
 * replay with its error.
 */
export interface ReplayParking {
  readonly parked: ParkedEvents;
  /** The streams held so far, and how many events this replay parked. */
  readonly held: Set<string>;
  count: number;
}

/** A parking for a replay, holding the streams the projector holds now. */
async function replayParking(parked: ParkedEvents): Promise<ReplayParking> {
  const held = (await parked.heldStreams())
    .filter((stream) => stream.consumerGroup === PROJECTOR_GROUP)
    .map((stream) => stream.streamId);
  return { parked, held: new Set(held), count: 0 };
}

/**
 * Applies a batch in `client`'s transaction, skipping the held streams. When the batch fails and
 * `parking` is given, it is applied event by event (a savepoint each): an event that fails is parked
 * with its reason and its stream held from then on. A database that is down, times out or aborts the
 * transaction (`isDependencyDown`, the live parking's rule) is no reason to park: that error stops the
 * rebuild, which can be run again.
 */
async function applyOrPark(
  client: PoolClient,
  schema: string,
  events: readonly StoredEvent[],
  parking: ReplayParking | undefined,
): Promise<void> {
  if (!parking) {
    await applyEvents(client, schema, events);
    return;
  }
  await client.query('SAVEPOINT batch');
  try {
    await applyEvents(
      client,
      schema,
      events.filter((event) => !parking.held.has(event.streamId)),
    );
    await client.query('RELEASE SAVEPOINT batch');
    for (const event of events)
      if (parking.held.has(event.streamId)) await parking.parked.hold(PROJECTOR_GROUP, event);
    return;
  } catch (error) {
    if (isDependencyDown(error)) throw error;
    await client.query('ROLLBACK TO SAVEPOINT batch');
  }
  for (const event of events) {
    if (parking.held.has(event.streamId)) {
      await parking.parked.hold(PROJECTOR_GROUP, event);
      continue;
    }
    await client.query('SAVEPOINT event');
    try {
      await applyEvents(client, schema, [event]);
      await client.query('RELEASE SAVEPOINT event');
    } catch (error) {
      if (isDependencyDown(error)) throw error;
      await client.query('ROLLBACK TO SAVEPOINT event');
      await parking.parked.park(PROJECTOR_GROUP, event, reasonOf(error), 1);
      parking.held.add(event.streamId);
      parking.count++;
    }
  }
}

/**
 * Replays the event store into fresh read tables and swaps them in: readers keep the old tables
 * until one transaction renames the schemas, so they never see a gap. The swap waits for the live
 * projector's batch in flight (advisory lock) and replays what arrived meanwhile first. An event it
 * cannot apply is parked, as the live projector parks it (`parked`: how many), and the rebuild goes on.
 */
export async function rebuildReadModel(
  pool: Pool,
  store: EventStore,
  parkedEvents: ParkedEvents,
  progress: RebuildProgress,
): Promise<{ events: number; parked: number }> {
  const parking = await replayParking(parkedEvents);
  const replayed = await replayReadModel(pool, store, NEXT_SCHEMA, progress, parking);
  let { position, events: done } = replayed;
  await inTransaction(pool, async (client) => {
    await client.query(`SELECT pg_advisory_xact_lock(${PROJECTION_LOCK})`);
    for (;;) {
      const { events, through } = await store.readAll(position, {
        limit: BATCH,
        streamTypes: PROJECTED_STREAM_TYPES,
      });
      if (through === undefined) break;
      await applyOrPark(client, NEXT_SCHEMA, events, parking);
      position = through;
      done += events.length;
    }
    await client.query(`ALTER SCHEMA ${READ_SCHEMA} RENAME TO ${REPLACED_SCHEMA}`);
    await client.query(`ALTER SCHEMA ${NEXT_SCHEMA} RENAME TO ${READ_SCHEMA}`);
    await client.query(`SELECT pg_notify('${PROJECTION_CHANNEL}', '')`);
  });
  progress(done, Math.max(replayed.total, done));
  await pool.query(`DROP SCHEMA ${REPLACED_SCHEMA} CASCADE`);
  return { events: done, parked: parking.count };
}

/**
 * Replays the whole event store into fresh read tables in `schema` (dropped first, if it exists),
 * batch by batch, and resolves with the position it reached. The read model in use is not touched:
 * the chaos run compares such a replay with it, table by table. With `parking`, an event it cannot
 * apply is parked and its stream held (see {@link ReplayParking}); without, it stops the replay.
 */
export async function replayReadModel(
  pool: Pool,
  store: EventStore,
  schema: string,
  progress: RebuildProgress,
  parking?: ReplayParking,
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
    await inTransaction(pool, (client) => applyOrPark(client, schema, events, parking));
    position = through;
    done += events.length;
    progress(done, Math.max(total, done));
  }
  return { events: done, total, position };
}
