import { fileURLToPath } from 'node:url';
import type { Logger, Pool, PoolClient } from '@ofp/runtime';
import { migrate, prepared } from '@ofp/runtime';
import { StreamParked, WrongExpectedVersion } from './errors.js';
import type { GlobalPosition, NewEvent, StoredEvent } from './types.js';

/**
 * Postgres NOTIFY channel raised by every append, so readers wake without polling. The payload is the
 * appended stream's type (one notification per stream type in a transaction: Postgres folds equal
 * ones), so that a reader wakes only for the types it reads; an empty payload wakes every reader.
 */
export const EVENTS_CHANNEL = 'es_events';

const MIGRATIONS = fileURLToPath(new URL('../migrations', import.meta.url));

export async function migrateEventStore(pool: Pool, logger: Logger): Promise<void> {
  await migrate(pool, { component: 'event-store', directory: MIGRATIONS, logger });
}

export interface AppendInput {
  readonly streamId: string;
  readonly streamType: string;
  /** The version the caller decided on: 0 for a new stream. */
  readonly expectedVersion: number;
  readonly orgId: number | null;
  readonly events: readonly NewEvent[];
}

/** What a read of the global order found (see `EventStore.readAll`). */
export interface EventPage {
  /** The events of the stream types asked for, in global order. */
  readonly events: StoredEvent[];
  /** The position of the last event read, of any type; undefined when there was none to read. */
  readonly through: GlobalPosition | undefined;
  /** Whether it read as many events as it was allowed to: more may be there to read at once. */
  readonly full: boolean;
  /**
   * Whether an event of the types asked for had committed but was held back, behind an older
   * transaction still in flight: it becomes readable when that one ends, which may raise no
   * notification (a transaction that appended nothing raises none).
   */
  readonly heldBack: boolean;
}

export interface AppendResult {
  /** The stream's version after the append. */
  readonly version: number;
  /** Position of the last appended event. */
  readonly position: GlobalPosition;
}

interface EventRow {
  event_id: string;
  stream_id: string;
  stream_type: string;
  version: number;
  type: string;
  org_id: number | null;
  data: unknown;
  metadata: Record<string, unknown>;
  recorded_at: Date;
  transaction_id: string;
  position: number;
}

const EVENT_COLUMNS = eventColumns('es.events');

/**
 * Session settings for a pool that runs `readAll` on generic plans (`plan_cache_mode =
 * force_generic_plan`, as the standalone bus's readers do): its page is a walk of
 * `events_global_order` from the reader's position, and a generic plan knows neither that position nor
 * how far it is from the snapshot's horizon. One made while the log was small (a few hundred events)
 * chose a sequential scan and a sort, and the connection kept it until the next analyze of `es.events`
 * (a minute or more) while the log grew: every read then went through the whole table (up to 115
 * buffers per read at 2,000 events, and more with every event; 3 to 5 through the index). A bitmap scan
 * would read every event up to the horizon before its sort kept the first page. With both off, the page
 * is read in index order and stops at its limit, whatever the statistics were when the plan was made.
 */
export const LOG_READER_SETTINGS: Readonly<Record<string, string>> = {
  enable_seqscan: 'off',
  enable_bitmapscan: 'off',
};

/** Whether an event is of the stream types readAll asks for (`$3`; all when null). */
const WANTED = '($3::text[] IS NULL OR es.events.stream_type = ANY($3::text[]))';
/** readAll's columns: an event of another type comes without its payload, and says it is not wanted. */
const READ_ALL_COLUMNS = `${eventColumns('es.events', {
  data: `CASE WHEN ${WANTED} THEN es.events.data END`,
  metadata: `CASE WHEN ${WANTED} THEN es.events.metadata END`,
})}, ${WANTED} AS wanted`;

/** The columns of an event row of `table`; `computed` gives some of them as expressions instead. */
function eventColumns(table: string, computed: Readonly<Record<string, string>> = {}): string {
  return [
    'event_id',
    'stream_id',
    'stream_type',
    'version',
    'type',
    'org_id',
    'data',
    'metadata',
    'recorded_at',
    'position',
  ]
    .map((c) => (computed[c] === undefined ? `${table}.${c}` : `${computed[c]} AS ${c}`))
    .concat(`${table}.transaction_id::text AS transaction_id`)
    .join(', ');
}

function toStoredEvent(row: EventRow): StoredEvent {
  return {
    eventId: row.event_id,
    streamId: row.stream_id,
    streamType: row.stream_type,
    version: row.version,
    type: row.type,
    orgId: row.org_id,
    data: row.data,
    metadata: row.metadata,
    recordedAt: row.recorded_at,
    position: { transactionId: row.transaction_id, position: row.position },
  };
}

export interface EventStoreOptions {
  /** Write outbox rows for the Kafka relay (distributed mode). */
  readonly outbox: boolean;
}

/** A concurrent append's event at one of `input`'s versions (a unique violation) as the race it is. */
function versionRaceOf(error: unknown, input: AppendInput): unknown {
  return (error as { code?: string }).code === '23505' &&
    (error as { constraint?: string }).constraint === 'events_stream_id_version_key'
    ? new WrongExpectedVersion(input.streamId, input.expectedVersion)
    : error;
}

/** The append statements' texts, made once each: a text made at every call was hashed again by `prepared`. */
const appendTexts = new Map<string, string>();

/**
 * The append's one statement: the version check, the check that no event of the stream is parked
 * (API.md §12), the events, the outbox rows and the wake-up notification (naming the stream type). A
 * new stream needs neither check: its first event is version 1, which the unique (stream_id, version)
 * refuses when the stream exists (a concurrent create, or a decision on a stream it took for new: then
 * the caller decides again and meets the checks), and a stream without events has none parked. The
 * two probes were 50-110 µs of Postgres CPU per append (docs/benchmarks.md). One event (every record
 * command's append) goes as scalar parameters: the arrays cost Postgres their parsing and the unnest
 * (about a fifth of the append's Postgres CPU, docs/benchmarks.md), and this process their literals;
 * several go as one array per column.
 */
function appendText(single: boolean, checked: boolean, outbox: boolean): string {
  const key = `${single} ${checked} ${outbox}`;
  let text = appendTexts.get(key);
  if (text !== undefined) return text;
  const checks = checked
    ? `
          WHERE (SELECT coalesce(max(version), 0) FROM es.events WHERE stream_id = $1) = $9
            AND NOT EXISTS (SELECT FROM es.parked_events WHERE stream_id = $1)`
    : '';
  const rowsOf = single
    ? `SELECT $4::uuid, $1, $2, $5::int, $6, $3, $7::jsonb, $8::jsonb${checks}`
    : `SELECT e.event_id, $1, $2, e.version, e.type, $3, e.data, e.metadata
           FROM unnest($4::uuid[], $5::int[], $6::text[], $7::jsonb[], $8::jsonb[])
                AS e(event_id, version, type, data, metadata)${checks}`;
  const queued = outbox
    ? ', queued AS (INSERT INTO es.outbox (position, transaction_id) SELECT position, transaction_id FROM inserted)'
    : '';
  text = `WITH inserted AS (
         INSERT INTO es.events (event_id, stream_id, stream_type, version, type, org_id, data, metadata)
         ${rowsOf}
         RETURNING position, transaction_id
       )${queued}
       SELECT position, transaction_id::text AS transaction_id, pg_notify('${EVENTS_CHANNEL}', $2) FROM inserted${single ? '' : '\n       ORDER BY position'}`;
  appendTexts.set(key, text);
  return text;
}

/** readAll's texts by page size, made once each (see `appendTexts`). */
const readAllTexts = new Map<number, string>();

/** readAll's statement for pages of `limit` events (see `EventStore.readAll`). */
function readAllText(limit: number): string {
  let text = readAllTexts.get(limit);
  if (text === undefined) {
    text = `SELECT page.*, held.back AS held_back
           FROM (SELECT (SELECT es.events.transaction_id
                           FROM es.events
                          WHERE es.events.transaction_id >= pg_snapshot_xmin(pg_current_snapshot())
                            AND ${WANTED}
                          ORDER BY es.events.transaction_id
                          LIMIT 1) IS NOT NULL AS back) AS held
           LEFT JOIN LATERAL (
                 SELECT ${READ_ALL_COLUMNS}
                   FROM es.events
                  WHERE (es.events.transaction_id, es.events.position) > ($1::xid8, $2::bigint)
                    AND es.events.transaction_id < pg_snapshot_xmin(pg_current_snapshot())
                  ORDER BY es.events.transaction_id, es.events.position
                  LIMIT ${limit}) AS page ON true`;
    readAllTexts.set(limit, text);
  }
  return text;
}

/**
 * Appends and reads events. Appends run in their own transaction (one stream's events without
 * writes beside them are a single statement, its own transaction): the events' INSERT is that
 * transaction's first write, so its transaction id is assigned only after the caller read the
 * stream. That keeps one stream's events in transaction-id order, which the global order relies on.
 * A multi-stream append keeps the rule: every stream it writes was read before its transaction
 * began, and all its events INSERTs come before any other write.
 */
export class EventStore {
  constructor(
    private readonly pool: Pool,
    private readonly options: EventStoreOptions,
  ) {}

  /**
   * Appends `events` to a stream if it is still at `expectedVersion`, together with their outbox
   * rows; `alsoInTransaction` may add writes that must commit or fail with the events (uniqueness
   * reservations, idempotency records). Throws WrongExpectedVersion when another writer got there first.
   */
  async append(
    input: AppendInput,
    alsoInTransaction?: (client: PoolClient, result: AppendResult) => Promise<void>,
  ): Promise<AppendResult> {
    const [result] = await this.appendToStreams(
      [input],
      alsoInTransaction && ((client, results) => alsoInTransaction(client, results[0]!)),
    );
    return result!;
  }

  /**
   * Appends to several streams in one transaction, each at its expected version: all commit or none
   * does (a command deciding on two aggregates, such as a shipment and its fulfillment order). The
   * streams are written in stream id order, so two such appends sharing streams queue on the same
   * stream first rather than deadlock. Results come in the order of `inputs`. With no input at all,
   * `alsoInTransaction` runs in a transaction of its own (a command that decided no event but must
   * still record something).
   * @throws WrongExpectedVersion naming the first stream another writer changed.
   */
  async appendToStreams(
    inputs: readonly AppendInput[],
    alsoInTransaction?: (client: PoolClient, results: readonly AppendResult[]) => Promise<void>,
  ): Promise<AppendResult[]> {
    if (inputs.some((input) => input.events.length === 0))
      throw new Error('append needs at least one event per stream');
    if (inputs.length === 0 && !alsoInTransaction) throw new Error('append needs a stream');
    if (new Set(inputs.map((input) => input.streamId)).size !== inputs.length)
      throw new Error('append names a stream twice');
    const [only] = inputs;
    if (only && inputs.length === 1 && !alsoInTransaction) {
      // One statement is a transaction of its own: no BEGIN and COMMIT round trips.
      return [await this.insert(this.pool, only)];
    }
    const ordered = [...inputs].sort((a, b) =>
      a.streamId < b.streamId ? -1 : a.streamId > b.streamId ? 1 : 0,
    );
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const byStream = new Map<string, AppendResult>();
      for (const input of ordered) byStream.set(input.streamId, await this.insert(client, input));
      const results = inputs.map((input) => byStream.get(input.streamId)!);
      if (alsoInTransaction) await alsoInTransaction(client, results);
      await client.query('COMMIT');
      return results;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  }

  /**
   * Appends inside a transaction the caller owns (another service's state change that must commit
   * with its event, like a revoked grant). Only for streams whose order does not depend on the
   * transaction id: a new stream (`expectedVersion` 0) of its own, as the events of one record
   * otherwise need their INSERT to be the transaction's first write (see the class comment).
   */
  async appendNewStreamIn(client: PoolClient, input: AppendInput): Promise<AppendResult> {
    if (input.expectedVersion !== 0) throw new Error('appendNewStreamIn only starts new streams');
    // A stream that exists fails the insert, and with it the caller's transaction.
    return this.insert(client, input);
  }

  private async insert(client: Pool | PoolClient, input: AppendInput): Promise<AppendResult> {
    const n = input.events.length;
    const versions = input.events.map((_, i) => input.expectedVersion + i + 1);
    // One statement (`appendText`): the checks, the events, the outbox rows and the notification.
    const checked = input.expectedVersion > 0;
    const single = n === 1;
    const [only] = input.events;
    const values = single
      ? [
          only!.eventId,
          versions[0],
          only!.type,
          JSON.stringify(only!.data),
          JSON.stringify(only!.metadata ?? {}),
        ]
      : [
          input.events.map((e) => e.eventId),
          versions,
          input.events.map((e) => e.type),
          input.events.map((e) => JSON.stringify(e.data)),
          input.events.map((e) => JSON.stringify(e.metadata ?? {})),
        ];
    // A concurrent append's event at one of these versions fails the statement on the unique
    // (stream_id, version): the race it is, as when the version check finds no row to insert.
    const { rows } = await client
      .query<{ position: number; transaction_id: string }>(
        prepared(appendText(single, checked, this.options.outbox), [
          input.streamId,
          input.streamType,
          input.orgId,
          ...values,
          ...(checked ? [input.expectedVersion] : []),
        ]),
      )
      .catch((error: unknown) => {
        throw versionRaceOf(error, input);
      });
    const last = rows[n - 1];
    if (rows.length !== n || !last) {
      const { rows: parked } = await client.query<{ event_id: string; consumer_group: string }>(
        `SELECT event_id, consumer_group FROM es.parked_events
          WHERE stream_id = $1 ORDER BY reason IS NULL, version LIMIT 1`,
        [input.streamId],
      );
      if (parked[0]) throw new StreamParked(input.streamId, parked[0].event_id, parked[0].consumer_group);
      throw new WrongExpectedVersion(input.streamId, input.expectedVersion);
    }
    return {
      version: input.expectedVersion + n,
      position: { transactionId: last.transaction_id, position: last.position },
    };
  }

  /** A stream's events in version order, from `fromVersion` (inclusive). */
  async readStream(streamId: string, fromVersion = 1): Promise<StoredEvent[]> {
    const { rows } = await this.pool.query<EventRow>(
      prepared(
        `SELECT ${EVENT_COLUMNS} FROM es.events WHERE stream_id = $1 AND version >= $2 ORDER BY version`,
        [streamId, fromVersion],
      ),
    );
    return rows.map(toStoredEvent);
  }

  /** The events of these ids that exist, in their streams' order (by stream, then version). */
  async readEvents(eventIds: readonly string[]): Promise<StoredEvent[]> {
    const { rows } = await this.pool.query<EventRow>(
      `SELECT ${EVENT_COLUMNS} FROM es.events WHERE event_id = ANY($1::uuid[]) ORDER BY stream_id, version`,
      [eventIds],
    );
    return rows.map(toStoredEvent);
  }

  /** A stream's last event, or undefined for a stream that does not exist. */
  async readStreamHead(streamId: string): Promise<StoredEvent | undefined> {
    const { rows } = await this.pool.query<EventRow>(
      prepared(`SELECT ${EVENT_COLUMNS} FROM es.events WHERE stream_id = $1 ORDER BY version DESC LIMIT 1`, [
        streamId,
      ]),
    );
    return rows[0] && toStoredEvent(rows[0]);
  }

  /**
   * Those of `streamIds` with an event parked by some consumer (API.md §12): their later events wait
   * behind it until an operator's retry.
   */
  async parkedStreams(streamIds: readonly string[]): Promise<Set<string>> {
    const { rows } = await this.pool.query<{ stream_id: string }>(
      prepared(`SELECT DISTINCT stream_id FROM es.parked_events WHERE stream_id = ANY($1::text[])`, [
        streamIds,
      ]),
    );
    return new Set(rows.map((row) => row.stream_id));
  }

  /** The current version of each of the streams that exist among `streamIds`. */
  async streamVersions(streamIds: readonly string[]): Promise<Map<string, number>> {
    const { rows } = await this.pool.query<{ stream_id: string; version: number }>(
      prepared(
        `SELECT stream_id, max(version) AS version FROM es.events WHERE stream_id = ANY($1::text[])
       GROUP BY stream_id`,
        [streamIds],
      ),
    );
    return new Map(rows.map((row) => [row.stream_id, row.version]));
  }

  /**
   * The next `limit` events after `after` in global order, and of those the ones of the given stream
   * types (all when omitted). Only events of transactions older than every transaction still in flight
   * are read, so a later call never finds an event that sorts before one this call read. `through` is
   * the last event read, of whatever type: a reader of rare types moves its checkpoint past the others
   * instead of scanning them again at every call (a million people's events between two orders would
   * otherwise be read again for every order).
   */
  async readAll(
    after: GlobalPosition,
    options: { limit: number; streamTypes?: readonly string[] },
  ): Promise<EventPage> {
    // The limit is part of the text, so that the generic plan of the named statement knows it. No CTE:
    // planning the statement cost Postgres more than running it (the bus's readers plan it once per
    // connection). Events of other types come back without their payload (a few ids), so that the last
    // one read gives `through`.
    // ORDER BY names the xid8 column: the text `transaction_id` of EVENT_COLUMNS would put "10000"
    // before "9999" and move a checkpoint past unread events.
    // Whether events were held back comes in the same statement (one row of nulls when the page is
    // empty): an index probe from the snapshot's xmin, which finds the few events not yet readable.
    // It needs no lower bound of `after`: a snapshot's xmin never moves back, so every event from it on
    // is after any position an earlier read reached. A scalar subquery in index order rather than an
    // EXISTS, which the generic plan answered with a scan of the whole table.
    const limit = options.limit;
    if (!Number.isSafeInteger(limit) || limit < 1) throw new Error(`readAll: bad limit ${limit}`);
    const { rows } = await this.pool.query<
      (EventRow & { wanted: boolean; held_back: boolean }) | { event_id: null; held_back: boolean }
    >(prepared(readAllText(limit), [after.transactionId, after.position, options.streamTypes ?? null]));
    const heldBack = rows[0]?.held_back === true;
    const read = rows.filter(
      (row): row is EventRow & { wanted: boolean; held_back: boolean } => row.event_id !== null,
    );
    const last = read[read.length - 1];
    return {
      events: read.filter((row) => row.wanted).map(toStoredEvent),
      through: last && { transactionId: last.transaction_id, position: last.position },
      full: read.length === limit,
      heldBack,
    };
  }

  /**
   * An organization's events after `after`, in the global order and with readAll's visibility rule
   * (only transactions older than every one still in flight), so that a reader resuming from the last
   * event it got never misses one that commits late, and never gets one twice: the events feed.
   * `types` and `streamId` narrow what comes back. With `scanLimit`, a read looks at no more than that
   * many of the organization's events (a rare type's page would otherwise read all the others first):
   * when it looked at that many and found fewer than `limit`, `scanEnd` is where the next read resumes,
   * past events that did not match.
   */
  async readOrganization(
    orgId: number,
    after: GlobalPosition,
    options: {
      readonly limit: number;
      readonly types?: readonly string[];
      readonly streamId?: string;
      readonly scanLimit?: number;
    },
  ): Promise<{ events: StoredEvent[]; scanEnd?: GlobalPosition }> {
    const { limit, scanLimit } = options;
    if (!Number.isSafeInteger(limit) || limit < 1) throw new Error(`readOrganization: bad limit ${limit}`);
    const visible = `org_id = $1 AND (transaction_id, position) > ($2::xid8, $3::bigint)
            AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())`;
    const values: unknown[] = [orgId, after.transactionId, after.position];
    let bound: GlobalPosition | undefined;
    if (scanLimit !== undefined) {
      // The scan's end: the organization's scanLimit-th visible event (of any type) past `after`.
      const { rows } = await this.pool.query<{ transaction_id: string; position: number }>(
        prepared(
          `SELECT transaction_id::text AS transaction_id, position FROM es.events WHERE ${visible}
            ORDER BY es.events.transaction_id, es.events.position OFFSET $4 LIMIT 1`,
          [...values, scanLimit - 1],
        ),
      );
      bound = rows[0] && { transactionId: rows[0].transaction_id, position: rows[0].position };
    }
    // Each filter is its own statement text, so that each named statement has a plan that fits it
    // (one stream's events come from its (stream_id, version) index). ORDER BY names the xid8 column,
    // as readAll's does: the selected text `transaction_id` sorts "10000" before "9999".
    const conditions = [visible];
    if (options.types !== undefined) conditions.push(`type = ANY($${values.push(options.types)}::text[])`);
    if (options.streamId !== undefined) conditions.push(`stream_id = $${values.push(options.streamId)}`);
    if (bound !== undefined)
      conditions.push(
        `(transaction_id, position) <= ($${values.push(bound.transactionId)}::xid8, $${values.push(bound.position)}::bigint)`,
      );
    const { rows } = await this.pool.query<EventRow>(
      prepared(
        `SELECT ${EVENT_COLUMNS} FROM es.events WHERE ${conditions.join(' AND ')}
          ORDER BY es.events.transaction_id, es.events.position LIMIT ${limit}`,
        values,
      ),
    );
    const events = rows.map(toStoredEvent);
    return events.length < limit && bound !== undefined ? { events, scanEnd: bound } : { events };
  }

  /**
   * A position that every event appended from now on, and every event not yet visible to readAll,
   * follows: the oldest transaction still in flight, before its first event.
   */
  async visibleHorizon(): Promise<GlobalPosition> {
    const { rows } = await this.pool.query<{ xmin: string }>(
      'SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin',
    );
    return { transactionId: rows[0]!.xmin, position: 0 };
  }

  /**
   * The position of the first event recorded at or after `time` (undefined when there is none), found
   * by a binary search over positions: events are recorded in about position order, so the answer
   * is exact to within the few milliseconds by which concurrent appends may interleave.
   */
  async firstPositionSince(time: Date): Promise<GlobalPosition | undefined> {
    const at = async (position: number) =>
      (
        await this.pool.query<{ position: number; transaction_id: string; recorded_at: Date }>(
          prepared(
            `SELECT position, transaction_id::text AS transaction_id, recorded_at FROM es.events
              WHERE position >= $1 ORDER BY position LIMIT 1`,
            [position],
          ),
        )
      ).rows[0];
    const { rows } = await this.pool.query<{ last: number | null }>(
      'SELECT max(position)::int8 AS last FROM es.events',
    );
    const last = rows[0]?.last;
    if (last === null || last === undefined) return undefined;
    let low = 0;
    let high = Number(last) + 1;
    // Invariant: every event below `low` was recorded before `time`; the one at `high`, if any, not.
    while (low < high) {
      const found = await at(Math.floor((low + high) / 2));
      if (found === undefined || found.position >= high) high = Math.floor((low + high) / 2);
      else if (found.recorded_at >= time) high = found.position;
      else low = found.position + 1;
    }
    const first = await at(low);
    return first && { transactionId: first.transaction_id, position: first.position };
  }

  /**
   * Outbox rows ready to publish (same visibility rule as readAll), oldest first, with their events.
   * For the Kafka relay.
   */
  async readOutbox(limit: number): Promise<StoredEvent[]> {
    const { rows } = await this.pool.query<EventRow>(
      `SELECT ${eventColumns('e')}
         FROM es.outbox o JOIN es.events e ON e.position = o.position
        WHERE o.transaction_id < pg_snapshot_xmin(pg_current_snapshot())
        ORDER BY o.transaction_id, o.position
        LIMIT $1`,
      [limit],
    );
    return rows.map(toStoredEvent);
  }

  /** Events in the outbox not yet published, and the age in seconds of the oldest (0 when none). */
  async outboxBacklog(): Promise<{ events: number; oldestSeconds: number }> {
    const { rows } = await this.pool.query<{ events: number; seconds: number | null }>(
      `SELECT count(*)::int AS events,
              extract(epoch FROM clock_timestamp() - min(e.recorded_at))::float8 AS seconds
         FROM es.outbox o JOIN es.events e ON e.position = o.position`,
    );
    return { events: rows[0]?.events ?? 0, oldestSeconds: Math.max(0, rows[0]?.seconds ?? 0) };
  }

  /** Removes published events from the outbox. */
  async acknowledgeOutbox(positions: readonly number[]): Promise<void> {
    await this.pool.query('DELETE FROM es.outbox WHERE position = ANY($1::bigint[])', [positions]);
  }
}
