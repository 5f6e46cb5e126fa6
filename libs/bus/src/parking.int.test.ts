import { randomUUID } from 'node:crypto';
import { EventStore, ParkedEvents, migrateEventStore, type StoredEvent } from '@ofp/event-store';
import { createTestDatabase, testLogger, type TestDatabase } from '@ofp/testing';
import type { Module } from '@ofp/runtime';
import { consumerModule } from './consumer-module.js';
import { Parking } from './parking.js';
import { PgLogBus } from './pg-log-bus.js';

const GROUP = 'test.parking';

/** Waits until `condition` holds (checked every 50 ms), or fails after `timeoutMs`. */
async function until(
  condition: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 15_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('Parking (Postgres-log bus)', () => {
  let db: TestDatabase;
  let store: EventStore;
  let parked: ParkedEvents;
  let parking: Parking;
  let consumer: Module;
  const versions = new Map<string, number>();
  /** What the consumer applied, as `stream:version`, in order. */
  const applied: string[] = [];
  /** The events the consumer cannot apply, until they are fixed. */
  let poisoned = true;

  const append = async (
    streamId: string,
    orgId: number,
    data: Record<string, unknown> = {},
  ): Promise<void> => {
    const version = versions.get(streamId) ?? 0;
    await store.append({
      streamId,
      streamType: 'things',
      expectedVersion: version,
      orgId,
      events: [{ eventId: randomUUID(), type: 'things.written', data }],
    });
    versions.set(streamId, version + 1);
  };
  const appliedOf = (streamId: string): number[] =>
    applied.filter((each) => each.startsWith(`${streamId}:`)).map((each) => Number(each.split(':')[1]));

  beforeAll(async () => {
    db = await createTestDatabase();
    await migrateEventStore(db.pool, testLogger());
    store = new EventStore(db.pool, { outbox: false });
    parked = new ParkedEvents(db.pool);
    parking = new Parking({ parked, store, pool: db.pool, session: db.session, logger: testLogger() });
    const bus = new PgLogBus(db.pool, db.session, store, testLogger(), {
      batchSize: 50,
      pollIntervalMs: 100,
    });
    consumer = consumerModule(bus, {
      name: 'test',
      parking,
      subscriptions: [
        {
          group: GROUP,
          streamTypes: ['things'],
          // A batch applies all of its events or none, as the projector's transaction does.
          handle: async (events: readonly StoredEvent[]) => {
            const poison = events.find((event) => (event.data as { poison?: boolean }).poison && poisoned);
            if (poison) throw new Error(`cannot apply ${poison.streamId} v${poison.version}`);
            for (const event of events) {
              if (!applied.includes(`${event.streamId}:${event.version}`))
                applied.push(`${event.streamId}:${event.version}`);
            }
          },
        },
      ],
    });
    await consumer.start();
  });

  afterAll(async () => {
    await consumer?.stop();
    await parking?.close();
    await db?.drop();
  });

  it('parks an event it cannot apply, holds its stream behind it, and goes on with every other one', async () => {
    await append('a', 1);
    await append('a', 1, { poison: true });
    await append('a', 1);
    await append('b', 1);
    await append('c', 2);
    await until(() => appliedOf('b').length === 1 && appliedOf('c').length === 1, 'the other streams');
    await until(async () => (await parked.list({ limit: 10, offset: 0 })).total === 1, 'the parked event');

    const { parked: events } = await parked.list({ limit: 10, offset: 0 });
    expect(events).toEqual([
      expect.objectContaining({
        consumerGroup: GROUP,
        streamId: 'a',
        version: 2,
        orgId: 1,
        reason: 'cannot apply a v2',
        attempts: 4,
        waiting: 1,
      }),
    ]);
    expect(await parked.counts()).toEqual(new Map([[GROUP, 1]]));
    expect(appliedOf('a')).toEqual([1]);

    // Later writes: other streams go on at once; the held stream takes none (API.md §12: 503 naming
    // the parked event, nothing appended) rather than an event that would wait behind it.
    await append('b', 1);
    await expect(append('a', 1)).rejects.toMatchObject({
      kind: 'Unavailable',
      headers: { 'Retry-After': '60' },
      errors: { base: [expect.stringContaining(`${events[0]!.eventId} is parked by ${GROUP}`)] },
    });
    expect((await store.readStream('a')).map((event) => event.version)).toEqual([1, 2, 3]);
    await until(() => appliedOf('b').length === 2, 'a later event of another stream');
    expect((await parked.list({ limit: 10, offset: 0 })).parked[0]?.waiting).toBe(1);
    expect(appliedOf('a')).toEqual([1]);
  });

  it('applies the parked event and those behind it in order once retried after a fix, and the stream goes on', async () => {
    const [event] = (await parked.list({ limit: 10, offset: 0 })).parked;
    // A retry before the fix: it fails again and stays parked, with its stream behind it.
    expect(await parked.requestRetry(event!.id)).toMatchObject({ id: event!.id, waiting: 1 });
    await until(
      async () => (await parked.list({ limit: 10, offset: 0 })).parked[0]?.attempts === 8,
      'the failed retry',
    );
    expect(appliedOf('a')).toEqual([1]);

    poisoned = false;
    await parked.requestRetry(event!.id);
    await until(() => appliedOf('a').length === 3, 'the retried stream');
    expect(appliedOf('a')).toEqual([1, 2, 3]);
    expect((await parked.list({ limit: 10, offset: 0 })).total).toBe(0);
    expect(await parked.counts()).toEqual(new Map());

    await append('a', 1);
    await until(() => appliedOf('a').length === 4, 'the stream going on');
    expect(appliedOf('a')).toEqual([1, 2, 3, 4]);
    expect(await parked.requestRetry(event!.id)).toBeUndefined();
  });
});
