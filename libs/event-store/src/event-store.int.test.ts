// @runs-alone: expects reads right after appends to hold nothing back, which another file's open transaction would
import { jest } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { createPool } from '@ofp/runtime';
import { createTestDatabase, testLogger, type TestDatabase } from '@ofp/testing';
import { baseError } from '@ofp/contracts';
import { handleCommand, type Command } from './command-handler.js';
import { EventStore, LOG_READER_SETTINGS, migrateEventStore } from './event-store.js';
import { WrongExpectedVersion } from './errors.js';
import { START, comparePositions, type GlobalPosition } from './types.js';

const event = (type = 'thing.happened', data: unknown = {}) => ({ eventId: randomUUID(), type, data });

describe('EventStore', () => {
  let db: TestDatabase;
  let store: EventStore;

  beforeAll(async () => {
    db = await createTestDatabase();
    await migrateEventStore(db.pool, testLogger());
    store = new EventStore(db.pool, { outbox: true });
  });
  afterAll(async () => {
    await db.drop();
  });

  /** Appends one event to a new stream of `streamType`; its position. */
  const appended = async (streamType: string): Promise<GlobalPosition> =>
    (
      await store.append({
        streamId: `${streamType}-${randomUUID()}`,
        streamType,
        expectedVersion: 0,
        orgId: 1,
        events: [event()],
      })
    ).position;

  it('appends to a new stream and reads it back in version order', async () => {
    const first = await store.append({
      streamId: 'a-1',
      streamType: 'a',
      expectedVersion: 0,
      orgId: 7,
      events: [event('a.created', { n: 1 }), event('a.updated', { n: 2 })],
    });
    expect(first.version).toBe(2);
    const events = await store.readStream('a-1');
    expect(events.map((e) => [e.version, e.type, e.data, e.orgId])).toEqual([
      [1, 'a.created', { n: 1 }, 7],
      [2, 'a.updated', { n: 2 }, 7],
    ]);
    expect(events[1]!.position).toEqual(first.position);
  });

  it('keeps data and metadata as given, one event or several (quotes, backslashes, non-ASCII)', async () => {
    const data = { note: 'a "quoted" \\ back\\slash, {braces}, ünïcode', list: [1, null, 'x'] };
    const metadata = { correlationId: 'c-"1"', causedBy: null };
    const one = { eventId: randomUUID(), type: 'q.created', data, metadata };
    await store.append({ streamId: 'q-1', streamType: 'q', expectedVersion: 0, orgId: 3, events: [one] });
    await store.append({
      streamId: 'q-1',
      streamType: 'q',
      expectedVersion: 1,
      orgId: 3,
      events: [
        { ...one, eventId: randomUUID(), type: 'q.updated' },
        { eventId: randomUUID(), type: 'q.updated', data },
      ],
    });
    const events = await store.readStream('q-1');
    expect(events.map((e) => [e.eventId === one.eventId, e.version, e.type, e.data, e.metadata])).toEqual([
      [true, 1, 'q.created', data, metadata],
      [false, 2, 'q.updated', data, metadata],
      [false, 3, 'q.updated', data, {}],
    ]);
  });

  it('refuses an append on a stale or future expected version', async () => {
    await store.append({ streamId: 'b-1', streamType: 'b', expectedVersion: 0, orgId: 1, events: [event()] });
    await expect(
      store.append({ streamId: 'b-1', streamType: 'b', expectedVersion: 0, orgId: 1, events: [event()] }),
    ).rejects.toBeInstanceOf(WrongExpectedVersion);
    await expect(
      store.append({ streamId: 'b-1', streamType: 'b', expectedVersion: 5, orgId: 1, events: [event()] }),
    ).rejects.toBeInstanceOf(WrongExpectedVersion);
    expect((await store.readStream('b-1')).map((e) => e.version)).toEqual([1]);
  });

  it('appends to several streams in one transaction, or to none when one is stale', async () => {
    await store.append({ streamId: 'm-2', streamType: 'm', expectedVersion: 0, orgId: 1, events: [event()] });
    const stale = store.appendToStreams([
      { streamId: 'm-1', streamType: 'm', expectedVersion: 0, orgId: 1, events: [event()] },
      { streamId: 'm-2', streamType: 'm', expectedVersion: 0, orgId: 1, events: [event()] },
    ]);
    await expect(stale).rejects.toMatchObject({ streamId: 'm-2', expectedVersion: 0 });
    expect(await store.readStream('m-1')).toEqual([]);
    const results = await store.appendToStreams([
      { streamId: 'm-2', streamType: 'm', expectedVersion: 1, orgId: 1, events: [event()] },
      { streamId: 'm-1', streamType: 'm', expectedVersion: 0, orgId: 1, events: [event(), event()] },
    ]);
    expect(results.map((r) => r.version)).toEqual([2, 2]);
    const [m1, m2] = [await store.readStream('m-1'), await store.readStream('m-2')];
    expect(m1[0]!.position.transactionId).toBe(m2[1]!.position.transactionId);
  });

  it('lets exactly one of many concurrent appends at the same version win, the creates of a new stream too', async () => {
    for (let round = 0; round <= 5; round++) {
      const attempts = await Promise.allSettled(
        Array.from({ length: 12 }, () =>
          store.append({
            streamId: 'c-1',
            streamType: 'c',
            expectedVersion: round,
            orgId: 1,
            events: [event()],
          }),
        ),
      );
      const won = attempts.filter((a) => a.status === 'fulfilled');
      const lost = attempts.filter((a) => a.status === 'rejected');
      expect(won).toHaveLength(1);
      for (const failure of lost) expect(failure.reason).toBeInstanceOf(WrongExpectedVersion);
    }
    expect((await store.readStream('c-1')).map((e) => e.version)).toEqual([1, 2, 3, 4, 5, 6]);
  });

  it("refuses a new stream inside the caller's transaction when the stream exists", async () => {
    await store.append({ streamId: 'n-1', streamType: 'n', expectedVersion: 0, orgId: 1, events: [event()] });
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      await expect(
        store.appendNewStreamIn(client, {
          streamId: 'n-1',
          streamType: 'n',
          expectedVersion: 0,
          orgId: 1,
          events: [event()],
        }),
      ).rejects.toBeInstanceOf(WrongExpectedVersion);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
    expect((await store.readStream('n-1')).map((e) => e.version)).toEqual([1]);
  });

  it('appends one stream without writes beside it as one statement of the pool, with no BEGIN or COMMIT', async () => {
    // A transaction checks a client out of the pool (pool.connect) and sends BEGIN, the append, COMMIT.
    const query = jest.spyOn(db.pool, 'query');
    try {
      await store.append({
        streamId: 's-1',
        streamType: 's',
        expectedVersion: 0,
        orgId: 1,
        events: [event()],
      });
      expect(query).toHaveBeenCalledTimes(1);
      await store.append(
        { streamId: 's-1', streamType: 's', expectedVersion: 1, orgId: 1, events: [event()] },
        async (client) => {
          await client.query('SELECT 1');
        },
      );
      expect(query).toHaveBeenCalledTimes(1);
    } finally {
      query.mockRestore();
    }
    expect((await store.readStream('s-1')).map((e) => e.version)).toEqual([1, 2]);
  });

  it('rolls the events back when a write in the same transaction fails', async () => {
    await expect(
      store.append(
        { streamId: 'd-1', streamType: 'd', expectedVersion: 0, orgId: 1, events: [event()] },
        async (client) => {
          await client.query('SELECT 1/0');
        },
      ),
    ).rejects.toThrow(/division by zero/);
    expect(await store.readStream('d-1')).toEqual([]);
  });

  it('holds back events of a transaction that started earlier and commits later, then returns them', async () => {
    let releaseSlow!: () => void;
    const slowMayCommit = new Promise<void>((resolve) => (releaseSlow = resolve));
    let slowInserted!: () => void;
    const slowHasInserted = new Promise<void>((resolve) => (slowInserted = resolve));
    const slow = store.append(
      { streamId: 'e-slow', streamType: 'e', expectedVersion: 0, orgId: 1, events: [event()] },
      async () => {
        slowInserted();
        await slowMayCommit;
      },
    );
    await slowHasInserted;
    const fast = await store.append({
      streamId: 'e-fast',
      streamType: 'e',
      expectedVersion: 0,
      orgId: 1,
      events: [event()],
    });
    // The fast event is committed, but a reader must not pass it while the older transaction is open.
    const before = await store.readAll(START, { limit: 1000, streamTypes: ['e'] });
    expect(before.events).toEqual([]);
    releaseSlow();
    const slowResult = await slow;
    const after = await store.readAll(START, { limit: 1000, streamTypes: ['e'] });
    expect(after.events.map((e) => e.streamId)).toEqual(['e-slow', 'e-fast']);
    expect(comparePositions(slowResult.position, fast.position)).toBeLessThan(0);
  });

  it('reads in the numeric order of transaction ids, also where they gain a digit', async () => {
    // Transaction ids 9 and 10 (long committed, so visible): in text order "10" would come first.
    for (const [transactionId, streamId] of [
      ['10', 'x-later'],
      ['9', 'x-earlier'],
    ] as const)
      await db.pool.query(
        `INSERT INTO es.events (transaction_id, event_id, stream_id, stream_type, version, type, org_id, data)
         VALUES ($1::xid8, $2, $3, 'x', 1, 'x.created', 1, '{}')`,
        [transactionId, randomUUID(), streamId],
      );
    const first = await store.readAll(START, { limit: 1, streamTypes: ['x'] });
    expect(first.events.map((e) => e.streamId)).toEqual(['x-earlier']);
    const rest = await store.readAll(first.through!, { limit: 10, streamTypes: ['x'] });
    expect(rest.events.map((e) => e.streamId)).toEqual(['x-later']);
  });

  it('reads past the events of other stream types, so that a reader of rare types never reads them again', async () => {
    const start = (await store.readAll(START, { limit: 1_000_000 })).through ?? START;
    const others = [await appended('other'), await appended('other'), await appended('other')];
    const rare = await appended('rare');
    const last = await appended('other');

    // Two of the three others: nothing of the type asked for, and where the next read starts.
    const page = await store.readAll(start, { limit: 2, streamTypes: ['rare'] });
    expect(page).toEqual({ events: [], through: others[1], full: true, heldBack: false });
    const next = await store.readAll(page.through!, { limit: 2, streamTypes: ['rare'] });
    expect(next.events.map((e) => e.position)).toEqual([rare]);
    expect(next.through).toEqual(rare);
    expect(next.full).toBe(true);
    const end = await store.readAll(next.through!, { limit: 2, streamTypes: ['rare'] });
    expect(end).toEqual({ events: [], through: last, full: false, heldBack: false });
    expect(await store.readAll(end.through!, { limit: 2, streamTypes: ['rare'] })).toEqual({
      events: [],
      through: undefined,
      full: false,
      heldBack: false,
    });
  });

  it('says when an event of the types asked for is held back behind an older transaction in flight', async () => {
    const start = (await store.readAll(START, { limit: 1_000_000 })).through ?? START;
    const older = await db.pool.connect();
    try {
      // An older transaction with an id of its own, still in flight when the event commits.
      await older.query('BEGIN');
      await older.query('SELECT pg_current_xact_id()');
      const held = await appended('held');
      expect(await store.readAll(start, { limit: 10, streamTypes: ['held'] })).toEqual({
        events: [],
        through: undefined,
        full: false,
        heldBack: true,
      });
      expect((await store.readAll(start, { limit: 10, streamTypes: ['other'] })).heldBack).toBe(false);
      await older.query('COMMIT');
      const page = await store.readAll(start, { limit: 10, streamTypes: ['held'] });
      expect(page.events.map((e) => e.position)).toEqual([held]);
      expect(page.heldBack).toBe(false);
    } finally {
      older.release();
    }
  });

  it('keeps outbox rows until acknowledged', async () => {
    const outbox = await store.readOutbox(10_000);
    expect(outbox.length).toBeGreaterThan(0);
    await store.acknowledgeOutbox(outbox.map((e) => e.position.position));
    expect(await store.readOutbox(10_000)).toEqual([]);
  });

  describe('handleCommand', () => {
    beforeAll(async () => {
      await db.pool.query('CREATE TABLE counted (stream_id text PRIMARY KEY, total int NOT NULL)');
    });

    /** Adds one to a counter kept as events, and to a table beside them in their transaction. */
    const increment = (streamId: string, loads: { count: number }): Command<number, number> => ({
      load: async () => {
        loads.count++;
        return (await store.readStreamHead(streamId))?.version ?? 0;
      },
      decide: (version) => ({
        appends: [
          {
            streamId,
            streamType: 'counter',
            expectedVersion: version,
            orgId: 1,
            events: [{ eventId: randomUUID(), type: 'counter.incremented', data: { total: version + 1 } }],
          },
        ],
        alsoInTransaction: async (client) => {
          await client.query(
            `INSERT INTO counted VALUES ($1, 1)
             ON CONFLICT (stream_id) DO UPDATE SET total = counted.total + 1`,
            [streamId],
          );
        },
        outcome: (results) => results.get(streamId)!.version,
      }),
    });

    it('decides concurrent commands on one stream again until each has appended once', async () => {
      const loads = { count: 0 };
      const versions = await Promise.all(
        Array.from({ length: 12 }, () => handleCommand(store, increment('counter-1', loads))),
      );
      expect([...versions].sort((a, b) => a - b)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
      const events = await store.readStream('counter-1');
      // Each event was decided on the version before it: no increment decided on a stale total committed.
      expect(events.map((event) => event.data)).toEqual(events.map((event) => ({ total: event.version })));
      const { rows } = await db.pool.query('SELECT total FROM counted WHERE stream_id = $1', ['counter-1']);
      expect(rows).toEqual([{ total: 12 }]);
      // Twelve commands racing on one stream: some lost a round and were loaded again.
      expect(loads.count).toBeGreaterThan(12);
    });

    it('appends nothing and writes nothing beside when the decision or its check refuses', async () => {
      const loads = { count: 0 };
      const refusal = baseError('Unprocessable', 'refused');
      const refusing = increment('counter-2', loads);
      await expect(
        handleCommand(store, {
          ...refusing,
          decide: () => {
            throw refusal;
          },
        }),
      ).rejects.toBe(refusal);
      await expect(handleCommand(store, { ...refusing, check: () => Promise.reject(refusal) })).rejects.toBe(
        refusal,
      );
      expect(loads.count).toBe(2);
      expect(await store.readStream('counter-2')).toEqual([]);
      const { rows } = await db.pool.query('SELECT total FROM counted WHERE stream_id = $1', ['counter-2']);
      expect(rows).toEqual([]);
    });

    it('rolls the events back when what commits with them fails', async () => {
      const failing = increment('counter-3', { count: 0 });
      await expect(
        handleCommand(store, {
          ...failing,
          decide: (version) => ({
            ...failing.decide(version),
            alsoInTransaction: () => Promise.reject(new Error('the write beside failed')),
          }),
        }),
      ).rejects.toThrow('the write beside failed');
      expect(await store.readStream('counter-3')).toEqual([]);
    });
  });
});

describe('es.parked_events lookups', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
    await migrateEventStore(db.pool, testLogger());
    // 20,000 events of 2,000 streams, each parked (or waiting) in three consumer groups.
    await db.pool.query(`
      INSERT INTO es.events (event_id, stream_id, stream_type, version, type, org_id, data)
      SELECT gen_random_uuid(), 'p-' || (i % 2000), 'p', i / 2000 + 1, 'p.changed', 1, '{}'
        FROM generate_series(0, 19999) i`);
    await db.pool.query(`
      INSERT INTO es.parked_events (consumer_group, event_id, stream_id, version, reason)
      SELECT g, e.event_id, e.stream_id, e.version, CASE WHEN e.version = 1 THEN 'failed' END
        FROM es.events e, unnest(ARRAY['projector', 'process-manager.inventory', 'webhook-dispatcher']) g`);
    await db.pool.query('ANALYZE es.parked_events');
  });
  afterAll(async () => {
    await db.drop();
  });

  // The statements of the append's check (every write), of a refused append, and of one group's stream.
  it.each([
    ['the append check', 'SELECT NOT EXISTS (SELECT FROM es.parked_events WHERE stream_id = $1)'],
    [
      'a refused append',
      `SELECT event_id, consumer_group FROM es.parked_events
        WHERE stream_id = $1 ORDER BY reason IS NULL, version LIMIT 1`,
    ],
    [
      "one group's stream",
      `SELECT id, event_id FROM es.parked_events WHERE consumer_group = 'projector' AND stream_id = $1
        ORDER BY version LIMIT 1`,
    ],
  ])('%s finds the stream with one index search', async (_, statement) => {
    const { rows } = await db.pool.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
      `EXPLAIN (ANALYZE, FORMAT JSON) ${statement}`,
      ['p-1234'],
    );
    // What reads the table: an index's scan (alone or under a bitmap heap scan) or a sequential one.
    const scans = nodesOf(rows[0]!['QUERY PLAN'][0].Plan).filter(
      (node) => node['Index Name'] !== undefined || node['Node Type'] === 'Seq Scan',
    );
    expect(scans).toEqual([
      expect.objectContaining({ 'Index Name': 'parked_events_by_stream', 'Index Searches': 1 }),
    ]);
  });
});

describe('readAll on generic plans, as the standalone bus reads', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
    await migrateEventStore(db.pool, testLogger());
    // The statistics stay those of a small log, as between two analyzes while a log grows.
    await db.pool.query('ALTER TABLE es.events SET (autovacuum_enabled = false)');
  });
  afterAll(async () => {
    await db.drop();
  });

  const add = (events: number) =>
    db.pool.query(
      `INSERT INTO es.events (event_id, stream_id, stream_type, version, type, org_id, data)
       SELECT gen_random_uuid(), 'r-' || gen_random_uuid(), 'r', 1, 'r.created', 1, '{}' FROM generate_series(1, $1)`,
      [events],
    );
  const tableScans = async () =>
    (
      await db.pool.query<{ seq: string; idx: string }>(
        "SELECT seq_scan AS seq, idx_scan AS idx FROM pg_stat_user_tables WHERE relid = 'es.events'::regclass",
      )
    ).rows.map(({ seq, idx }) => ({ seq: Number(seq), idx: Number(idx) }))[0]!;

  it('walks the index from the position, with a plan made while the log was small', async () => {
    await add(100);
    await db.pool.query('ANALYZE es.events');
    const readers = createPool({
      connectionString: db.url,
      applicationName: 'log-readers-test',
      max: 1,
      genericPlans: true,
      settings: LOG_READER_SETTINGS,
    });
    try {
      const store = new EventStore(readers, { outbox: false });
      const before = await tableScans();
      const first = await store.readAll(START, { limit: 500, streamTypes: ['r'] });
      expect(first.events).toHaveLength(100);
      await add(3_000);
      let position = first.through!;
      for (let page = 0; page < 7; page++) {
        const next = await store.readAll(position, { limit: 500, streamTypes: ['r'] });
        position = next.through ?? position;
      }
      expect(position.position).toBe(3_100);
      // The readers' backend reports its table statistics when it next goes idle.
      await readers.query('SELECT pg_stat_force_next_flush()');
      const after = await tableScans();
      expect({ seq: after.seq - before.seq, idx: after.idx > before.idx }).toEqual({ seq: 0, idx: true });
    } finally {
      await readers.end();
    }
  });
});

interface PlanNode {
  readonly 'Node Type': string;
  readonly 'Index Name'?: string;
  readonly Plans?: readonly PlanNode[];
  readonly [key: string]: unknown;
}

function nodesOf(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodesOf)];
}
