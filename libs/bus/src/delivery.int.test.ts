// @runs-alone: an appended event handled within 5 s, timed
import { randomUUID } from 'node:crypto';
import { EVENTS_CHANNEL, EventStore, migrateEventStore, type StoredEvent } from '@ofp/event-store';
import { createTestDatabase, testLogger, type TestDatabase } from '@ofp/testing';
import type { Bus, Subscription } from './bus.js';
import { PgLogBus } from './pg-log-bus.js';
import { KafkaBus } from './kafka/kafka-bus.js';
import { OutboxRelay } from './kafka/outbox-relay.js';
import { kafkaClientConfig } from './kafka/client.js';
import { Kafka } from './kafka/kafka-javascript.js';

const WRITERS = 8;
const EVENTS_PER_WRITER = 500;
const STREAMS_PER_WRITER = 10;

/** A consumer that keeps what it received, deduplicated by event id, and resolves when it has `expected`. */
class Collector {
  readonly byId = new Map<string, StoredEvent>();
  readonly order: StoredEvent[] = [];
  private waiting: { expected: number; resolve: () => void } | undefined;

  readonly handle = async (events: readonly StoredEvent[]): Promise<void> => {
    for (const event of events) {
      if (this.byId.has(event.eventId)) continue;
      this.byId.set(event.eventId, event);
      this.order.push(event);
    }
    if (this.waiting && this.byId.size >= this.waiting.expected) this.waiting.resolve();
  };

  until(expected: number, timeoutMs: number): Promise<void> {
    if (this.byId.size >= expected) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`received ${this.byId.size} of ${expected} events`)),
        timeoutMs,
      );
      this.waiting = { expected, resolve: () => (clearTimeout(timer), resolve()) };
    });
  }
}

/** 8 writers append 500 single-event appends each, holding each transaction open for a random time. */
async function writeConcurrently(store: EventStore, streamType: string): Promise<Map<string, number>> {
  const lastVersion = new Map<string, number>();
  await Promise.all(
    Array.from({ length: WRITERS }, async (_, writer) => {
      const versions = new Array<number>(STREAMS_PER_WRITER).fill(0);
      for (let i = 0; i < EVENTS_PER_WRITER; i++) {
        const stream = i % STREAMS_PER_WRITER;
        const streamId = `${streamType}-${writer}-${stream}`;
        await store.append(
          {
            streamId,
            streamType,
            expectedVersion: versions[stream]!,
            orgId: 1,
            events: [{ eventId: randomUUID(), type: `${streamType}.written`, data: { writer, i } }],
          },
          () => new Promise((resolve) => setTimeout(resolve, Math.random() * 4)),
        );
        versions[stream]!++;
        lastVersion.set(streamId, versions[stream]!);
      }
    }),
  );
  return lastVersion;
}

function expectCompleteAndOrdered(collector: Collector, lastVersion: Map<string, number>): void {
  expect(collector.byId.size).toBe(WRITERS * EVENTS_PER_WRITER);
  const seen = new Map<string, number[]>();
  for (const event of collector.order) {
    const versions = seen.get(event.streamId) ?? [];
    versions.push(event.version);
    seen.set(event.streamId, versions);
  }
  expect(seen.size).toBe(lastVersion.size);
  for (const [streamId, last] of lastVersion) {
    expect(seen.get(streamId)).toEqual(Array.from({ length: last }, (_, i) => i + 1));
  }
}

interface Adapter {
  name: string;
  setUp(db: TestDatabase, store: EventStore): Promise<{ bus: Bus; stop(): Promise<void> }>;
}

const kafkaTopics = {
  prefix: `test.${randomUUID().slice(0, 8)}.`,
  partitions: 4,
  replicationFactor: 1,
  create: true,
};

function kafkaClient(): Kafka {
  const brokers = (process.env.KAFKA_BROKERS ?? '').split(',').filter(Boolean);
  return new Kafka(kafkaClientConfig(brokers, 'delivery-test'));
}

const adapters: Adapter[] = [
  {
    name: 'Postgres-log bus',
    async setUp(db, store) {
      return {
        bus: new PgLogBus(db.pool, db.session, store, testLogger(), { batchSize: 200, pollIntervalMs: 200 }),
        stop: async () => {},
      };
    },
  },
  {
    name: 'Kafka bus (outbox relay)',
    async setUp(db, store) {
      const kafka = kafkaClient();
      const relay = new OutboxRelay(kafka, store, testLogger(), {
        session: db.session,
        topics: kafkaTopics,
        batchSize: 200,
        pollIntervalMs: 200,
        dataSchemaOf: () => 'urn:ofp:schema:delivery-test:1',
      });
      await relay.start();
      return {
        bus: new KafkaBus(kafka, testLogger(), { topics: kafkaTopics, batchSize: 200 }),
        stop: () => relay.stop(),
      };
    },
  },
];

describe.each(adapters)('$name', (adapter) => {
  let db: TestDatabase;
  let store: EventStore;
  let bus: Bus;
  let stopAdapter: () => Promise<void>;
  const subscriptions: Subscription[] = [];

  beforeAll(async () => {
    db = await createTestDatabase();
    await migrateEventStore(db.pool, testLogger());
    store = new EventStore(db.pool, { outbox: adapter.name.startsWith('Kafka') });
    ({ bus, stop: stopAdapter } = await adapter.setUp(db, store));
  });
  afterAll(async () => {
    for (const s of subscriptions) await s.stop();
    await stopAdapter();
    await db.drop();
  });

  it('delivers every event of 8 concurrent writers exactly once after dedup, in per-stream order', async () => {
    const collector = new Collector();
    subscriptions.push(
      await bus.subscribe({ group: `g-${randomUUID()}`, streamTypes: ['load'], handle: collector.handle }),
    );
    const lastVersion = await writeConcurrently(store, 'load');
    await collector.until(WRITERS * EVENTS_PER_WRITER, 60_000);
    expectCompleteAndOrdered(collector, lastVersion);
  }, 120_000);

  // kafkajs fetched the same messages about 48 times a second while the bus never resolved their
  // offsets: the handlers deduplicated and the commits (so the lag) moved on, so nothing but the count
  // of invocations per event shows it. Kept for every client the bus runs on.
  it('hands each event to its handler once in a quiet run, and counts it fetched and handled once', async () => {
    const group = `g-${randomUUID()}`;
    const invocations = new Map<string, number>();
    subscriptions.push(
      await bus.subscribe({
        group,
        streamTypes: ['quiet'],
        handle: async (events) => {
          for (const event of events)
            invocations.set(event.eventId, (invocations.get(event.eventId) ?? 0) + 1);
        },
      }),
    );
    const appended: string[] = [];
    for (let n = 0; n < 20; n++) {
      const eventId = randomUUID();
      appended.push(eventId);
      await store.append({
        streamId: `quiet-${n % 4}`,
        streamType: 'quiet',
        expectedVersion: Math.floor(n / 4),
        orgId: 1,
        events: [{ eventId, type: 'quiet.written', data: { n } }],
      });
    }
    const deadline = Date.now() + 30_000;
    while (invocations.size < appended.length && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 50));
    // Quiet from here on: a consumer whose position does not move would hand the events again meanwhile.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(appended.map((id) => invocations.get(id))).toEqual(appended.map(() => 1));
    expect(bus.throughput().find((counts) => counts.group === group)).toMatchObject({
      group,
      fetched: appended.length,
      handled: appended.length,
      restarts: 0,
    });
  }, 60_000);

  it('redelivers an event whose handler threw, and commits nothing past it', async () => {
    const group = `g-${randomUUID()}`;
    const delivered: string[] = [];
    let failures = 0;
    const subscription = await bus.subscribe({
      group,
      streamTypes: ['flaky'],
      handle: async (events) => {
        for (const event of events) {
          if ((event.data as { n: number }).n === 2 && failures < 3) {
            failures++;
            throw new Error('handler failure');
          }
        }
        delivered.push(...events.map((e) => String((e.data as { n: number }).n)));
      },
    });
    subscriptions.push(subscription);
    for (let n = 1; n <= 4; n++) {
      await store.append({
        streamId: 'flaky-1',
        streamType: 'flaky',
        expectedVersion: n - 1,
        orgId: 1,
        events: [{ eventId: randomUUID(), type: 'flaky.n', data: { n } }],
      });
    }
    const deadline = Date.now() + 30_000;
    while (!delivered.includes('4') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(failures).toBe(3);
    // Event 2 came again after each failure, and nothing after it was taken as done before it was.
    expect([...new Set(delivered)]).toEqual(['1', '2', '3', '4']);
  }, 60_000);
});

describe('Postgres-log bus, a consumer of rare stream types', () => {
  let db: TestDatabase;
  let store: EventStore;
  let subscription: Subscription | undefined;

  beforeAll(async () => {
    db = await createTestDatabase();
    await migrateEventStore(db.pool, testLogger());
    store = new EventStore(db.pool, { outbox: false });
  });
  afterAll(async () => {
    await subscription?.stop();
    await db.drop();
  });

  /**
   * A subscriber of `streamTypes` whose bus counts its reads of the log, with a poll far longer than
   * any test: only a notification, or a second look, reads again.
   */
  const countingReader = async (streamTypes: string[]) => {
    const counter = { reads: 0 };
    const counted = new (class extends EventStore {
      override readAll(...args: Parameters<EventStore['readAll']>) {
        counter.reads++;
        return super.readAll(...args);
      }
    })(db.pool, { outbox: false });
    const handled: StoredEvent[] = [];
    const bus = new PgLogBus(db.pool, db.session, counted, testLogger(), {
      batchSize: 100,
      pollIntervalMs: 60_000,
    });
    const subscription = await bus.subscribe({
      group: `g-${randomUUID()}`,
      streamTypes,
      handle: async (events) => void handled.push(...events),
    });
    return { counter, handled, subscription };
  };
  /** Appends one event to a new stream of `streamType`. */
  const appendOne = (streamType: string) =>
    store.append({
      streamId: `${streamType}-${randomUUID()}`,
      streamType,
      expectedVersion: 0,
      orgId: 1,
      events: [{ eventId: randomUUID(), type: `${streamType}.created`, data: {} }],
    });

  it('moves its checkpoint past the events of other types, so that it never reads them again', async () => {
    const group = `g-${randomUUID()}`;
    const handled: StoredEvent[] = [];
    const bus = new PgLogBus(db.pool, db.session, store, testLogger(), { batchSize: 2, pollIntervalMs: 200 });
    subscription = await bus.subscribe({
      group,
      streamTypes: ['rare'],
      handle: async (events) => void handled.push(...events),
    });
    let last = 0;
    for (let n = 0; n < 5; n++) {
      const appended = await store.append({
        streamId: `common-${n}`,
        streamType: 'common',
        expectedVersion: 0,
        orgId: 1,
        events: [{ eventId: randomUUID(), type: 'common.created', data: {} }],
      });
      last = appended.position.position;
    }
    const checkpoint = async (): Promise<number | undefined> =>
      (
        await db.pool.query<{ position: number }>(
          'SELECT position FROM es.checkpoints WHERE consumer_group = $1',
          [group],
        )
      ).rows[0]?.position;
    const deadline = Date.now() + 10_000;
    while ((await checkpoint()) !== last && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await checkpoint()).toBe(last);
    expect(handled).toEqual([]);
    await subscription.stop();
    subscription = undefined;
  });

  it('sleeps through appends of types it does not read, and wakes for one of its own at once', async () => {
    // A poll far longer than the test: only a notification can wake it.
    const { counter, handled, subscription: sleeper } = await countingReader(['rare']);
    try {
      // Caught up, and its first checkpoint (due within a second of the start) stored.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const asleep = counter.reads;
      for (let n = 0; n < 20; n++) await appendOne('common');
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(counter.reads - asleep).toBe(0);
      const appended = performance.now();
      await appendOne('rare');
      const deadline = Date.now() + 5_000;
      while (handled.length === 0 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 10));
      expect(handled.map((event) => event.streamType)).toEqual(['rare']);
      expect(performance.now() - appended).toBeLessThan(5_000);
    } finally {
      await sleeper.stop();
    }
  });

  it('reads once per append of its own types when nothing is held back, and again soon after when something is', async () => {
    // A poll far longer than the test: only a notification or a second look can read again.
    const { counter, handled, subscription: reader } = await countingReader(['own']);
    const append = () => appendOne('own');
    const handledSoon = async (count: number): Promise<void> => {
      const deadline = Date.now() + 5_000;
      while (handled.length < count && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 10));
      expect(handled).toHaveLength(count);
    };
    const older = await db.pool.connect();
    try {
      // Caught up, and its first checkpoint (due within a second of the start) stored.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const before = counter.reads;
      await append();
      await handledSoon(1);
      // Past the checkpoint's interval (1 s): the moved checkpoint is stored without another read.
      await new Promise((resolve) => setTimeout(resolve, 1_200));
      // The read that found it, and no second look: nothing was held back.
      expect(counter.reads - before).toBe(1);

      // An older transaction, still in flight, holds the next event back; it ends without appending,
      // which notifies nobody: the reader finds the event by looking again.
      await older.query('BEGIN');
      await older.query('SELECT pg_current_xact_id()');
      await append();
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(handled).toHaveLength(1);
      await older.query('COMMIT');
      await handledSoon(2);
    } finally {
      await older.query('ROLLBACK').catch(() => undefined);
      older.release();
      await reader.stop();
    }
  });

  it('stores where it is when it stops in order, so that the next consumer of its group hands nothing again', async () => {
    const group = `g-${randomUUID()}`;
    const bus = new PgLogBus(db.pool, db.session, store, testLogger(), {
      batchSize: 100,
      pollIntervalMs: 200,
    });
    const append = (n: number) =>
      store.append({
        streamId: `stopping-${n}`,
        streamType: 'stopping',
        expectedVersion: 0,
        orgId: 1,
        events: [{ eventId: randomUUID(), type: 'stopping.created', data: { n } }],
      });
    const handled: number[] = [];
    const handle = async (events: readonly StoredEvent[]) =>
      void handled.push(...events.map((event) => (event.data as { n: number }).n));
    const until = async (count: number) => {
      const deadline = Date.now() + 10_000;
      while (handled.length < count && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 20));
    };
    const first = await bus.subscribe({ group, streamTypes: ['stopping'], handle });
    for (let n = 1; n <= 5; n++) await append(n);
    await until(5);
    // Within the checkpoint's interval of the last batch: only stopping stores it.
    await first.stop();
    subscription = await bus.subscribe({ group, streamTypes: ['stopping'], handle });
    await append(6);
    await until(6);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(handled).toEqual([1, 2, 3, 4, 5, 6]);
  });
});

describe('Postgres-log bus, the next page read while a batch is handled', () => {
  let db: TestDatabase;
  let store: EventStore;

  beforeAll(async () => {
    db = await createTestDatabase();
    await migrateEventStore(db.pool, testLogger());
    store = new EventStore(db.pool, { outbox: false });
  });
  afterAll(async () => {
    await db.drop();
  });

  /**
   * A bus of pages of `batchSize` whose reads of the log are counted; while `hold` is set, a read's
   * answer waits for it. Its poll is far longer than any test: only a notification reads again.
   */
  const heldReader = (batchSize: number) => {
    const reads = { count: 0, hold: undefined as Promise<void> | undefined, answered: () => {} };
    const counted = new (class extends EventStore {
      override async readAll(...args: Parameters<EventStore['readAll']>) {
        reads.count++;
        const hold = reads.hold;
        const page = await super.readAll(...args);
        if (hold) {
          reads.answered();
          await hold;
        }
        return page;
      }
    })(db.pool, { outbox: false });
    const bus = new PgLogBus(db.pool, db.session, counted, testLogger(), {
      batchSize,
      pollIntervalMs: 60_000,
    });
    return { bus, reads };
  };
  const appendTo = (streamType: string, n: number) =>
    store.append({
      streamId: `${streamType}-${n}`,
      streamType,
      expectedVersion: 0,
      orgId: 1,
      events: [{ eventId: randomUUID(), type: `${streamType}.created`, data: { n } }],
    });
  const until = async (done: () => boolean): Promise<void> => {
    const deadline = Date.now() + 10_000;
    while (!done() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(done()).toBe(true);
  };
  const numbers = (events: readonly StoredEvent[]) => events.map((event) => (event.data as { n: number }).n);

  it('reads the page after a full one while that one is handled, and hands the pages in order', async () => {
    const streamType = `full-${randomUUID()}`;
    for (let n = 1; n <= 3; n++) await appendTo(streamType, n);
    const { bus, reads } = heldReader(1);
    let open = (): void => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    const handled: number[] = [];
    const subscription = await bus.subscribe({
      group: `g-${randomUUID()}`,
      streamTypes: [streamType],
      handle: async (events) => {
        if (handled.length === 0) await gate;
        handled.push(...numbers(events));
      },
    });
    try {
      // The first page (one event) is full: the second is read while the first is in hand.
      await until(() => reads.count === 2);
      expect(handled).toEqual([]);
      open();
      await until(() => handled.length === 3);
      expect(handled).toEqual([1, 2, 3]);
    } finally {
      await subscription.stop();
    }
  });

  it('reads the next page while a batch is handled when an append was announced since the batch was read', async () => {
    const streamType = `announced-${randomUUID()}`;
    const { bus, reads } = heldReader(100);
    let open = (): void => {};
    const gate = new Promise<void>((resolve) => (open = resolve));
    const handled: number[][] = [];
    const subscription = await bus.subscribe({
      group: `g-${randomUUID()}`,
      streamTypes: [streamType],
      handle: async (events) => {
        if (handled.length === 0) await gate;
        handled.push(numbers(events));
      },
    });
    let announced = (): void => {};
    const unlisten = await db.session.listen(EVENTS_CHANNEL, {
      notify: (type) => type === streamType && announced(),
    });
    try {
      // Caught up with the log (nothing of its type): asleep until an append of its type.
      await until(() => reads.count === 1);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(reads.count).toBe(1);
      // The read that finds the first append answers only once the second is announced: the consumer
      // heard of the second (it listens before this test does) before it handles the first.
      let letRead = (): void => {};
      reads.hold = new Promise<void>((resolve) => (letRead = resolve));
      const answered = new Promise<void>((resolve) => (reads.answered = resolve));
      await appendTo(streamType, 1);
      await answered;
      reads.hold = undefined;
      const heard = new Promise<void>((resolve) => (announced = resolve));
      await appendTo(streamType, 2);
      await heard;
      letRead();
      await until(() => reads.count === 3);
      expect(handled).toEqual([]);
      open();
      await until(() => handled.length === 2);
      expect(handled).toEqual([[1], [2]]);
      // Nothing announced since: no read after the page read ahead.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(reads.count).toBe(3);
    } finally {
      await unlisten();
      await subscription.stop();
    }
  });

  it('drops the page read ahead when the batch before it fails, and reads again from its checkpoint', async () => {
    const streamType = `failing-${randomUUID()}`;
    for (let n = 1; n <= 3; n++) await appendTo(streamType, n);
    const { bus } = heldReader(1);
    const attempts: number[] = [];
    const handled: number[] = [];
    const subscription = await bus.subscribe({
      group: `g-${randomUUID()}`,
      streamTypes: [streamType],
      handle: async (events) => {
        attempts.push(...numbers(events));
        if (attempts.length === 1) throw new Error('the first batch fails once');
        handled.push(...numbers(events));
      },
    });
    try {
      await until(() => handled.length === 3);
      expect(attempts).toEqual([1, 1, 2, 3]);
      expect(handled).toEqual([1, 2, 3]);
    } finally {
      await subscription.stop();
    }
  });
});
