import { randomUUID } from 'node:crypto';
import { PgLogBus } from '@ofp/bus';
import { recordStreamId, type RecordChange } from '@ofp/contracts';
import { EventStore, ParkedEvents, migrateEventStore } from '@ofp/event-store';
import { createTestDatabase, testLogger, type TestDatabase } from '@ofp/testing';
import type { Module } from '@ofp/runtime';
import { createProjectorModule } from './module.js';
import { rebuildReadModel } from './rebuild.js';
import { READ_SCHEMA } from '@ofp/models';

const ORG = 1;
const AT = '2026-11-21T08:00:00.000Z';

/** What a read schema holds: every table's rows, as text, in a stable order. */
async function snapshot(db: TestDatabase): Promise<Record<string, string[]>> {
  const { rows: tables } = await db.pool.query<{ table_name: string }>(
    'SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name',
    [READ_SCHEMA],
  );
  const result: Record<string, string[]> = {};
  for (const { table_name } of tables) {
    const { rows } = await db.pool.query<{ row: string }>(
      `SELECT t::text AS row FROM ${READ_SCHEMA}."${table_name}" t ORDER BY 1`,
    );
    result[table_name] = rows.map((r) => r.row);
  }
  return result;
}

describe('rebuilding the read model', () => {
  let db: TestDatabase;
  let store: EventStore;
  let projector: Module;

  beforeAll(async () => {
    db = await createTestDatabase();
    await migrateEventStore(db.pool, testLogger());
    store = new EventStore(db.pool, { outbox: false });
    const append = (
      model: string,
      singular: string,
      id: number,
      version: number,
      record: Record<string, unknown>,
      deleted = false,
    ) =>
      store.append({
        streamId: recordStreamId(model, id),
        streamType: model,
        expectedVersion: version - 1,
        orgId: ORG,
        events: [
          {
            eventId: randomUUID(),
            type: `${singular}.${deleted ? 'deleted' : version === 1 ? 'created' : 'updated'}`,
            data: {
              record: { id, ...record, external_id: null, created_at: AT, updated_at: AT, version },
              previous: {},
              deleted,
            } satisfies RecordChange,
          },
        ],
      });
    await append('phone_number_types', 'phone_number_type', 1, 1, { name: 'Work' });
    for (let id = 10; id < 70; id++) {
      const person = {
        first_name: `F${id % 7}`,
        last_name: `L${id}`,
        email: null,
        company: id % 3 === 0 ? null : 'Acme',
        phone_numbers: [{ number: `555${id}`, phone_number_type: { id: 1, name: 'Work' } }],
      };
      await append('people', 'person', id, 1, person);
      if (id % 5 === 0)
        await append('people', 'person', id, 2, { ...person, company: 'Renamed', phone_numbers: [] });
      if (id % 11 === 0) await append('people', 'person', id, id % 5 === 0 ? 3 : 2, person, true);
    }
    await append('phone_number_types', 'phone_number_type', 1, 2, { name: 'Office' });
    projector = createProjectorModule({
      pool: db.pool,
      bus: new PgLogBus(db.pool, db.session, store, testLogger(), { batchSize: 100, pollIntervalMs: 50 }),
      logger: testLogger(),
    });
    await projector.start();
    const streams = await db.pool.query<{ n: number }>(
      'SELECT count(DISTINCT stream_id)::int AS n FROM es.events',
    );
    for (let i = 0; i < 200; i++) {
      const projected = await db.pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM read.stream_versions',
      );
      if (projected.rows[0]!.n === streams.rows[0]!.n) break;
      await new Promise((r) => setTimeout(r, 50));
    }
  });
  afterAll(async () => {
    await projector.stop();
    await db.drop();
  });

  it('yields tables equal to the live projection, and readers never see a gap', async () => {
    const before = await snapshot(db);
    expect(before.people!.length).toBe(60 - 6); // ids 10-69, of which 11, 22, 33, 44, 55 and 66 were deleted
    let reading = true;
    const counts: number[] = [];
    const reader = (async () => {
      while (reading) {
        const { rows } = await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM read.people');
        counts.push(rows[0]!.n);
      }
    })();
    const progress: [number, number][] = [];
    const result = await rebuildReadModel(db.pool, store, new ParkedEvents(db.pool), (done, total) =>
      progress.push([done, total]),
    );
    reading = false;
    await reader;

    expect(await snapshot(db)).toEqual(before);
    expect(result.events).toBe(
      Number((await db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM es.events')).rows[0]!.n),
    );
    expect(progress.at(-1)).toEqual([result.events, result.events]);
    expect(result.parked).toBe(0);
    expect(counts.length).toBeGreaterThan(0);
    expect(new Set(counts)).toEqual(new Set([54]));
  });

  it('keeps projecting into the swapped-in tables', async () => {
    await store.append({
      streamId: recordStreamId('people', 500),
      streamType: 'people',
      expectedVersion: 0,
      orgId: ORG,
      events: [
        {
          eventId: randomUUID(),
          type: 'person.created',
          data: {
            record: {
              id: 500,
              first_name: null,
              last_name: 'After',
              email: null,
              company: null,
              phone_numbers: [],
              external_id: null,
              created_at: AT,
              updated_at: AT,
              version: 1,
            },
            previous: {},
            deleted: false,
          },
        },
      ],
    });
    let found = 0;
    for (let i = 0; i < 100 && found === 0; i++) {
      found = (await db.pool.query('SELECT 1 FROM read.people WHERE id = 500')).rowCount ?? 0;
      if (found === 0) await new Promise((r) => setTimeout(r, 50));
    }
    expect(found).toBe(1);
  });

  it('parks an event it cannot apply, holds its record behind it, and completes (API.md §12)', async () => {
    // The live projector (no parking here) would retry the event for ever: the rebuild alone meets it.
    await projector.stop();
    const item = (version: number, price: string) => ({
      streamId: recordStreamId('items', 700),
      streamType: 'items',
      expectedVersion: version - 1,
      orgId: ORG,
      events: [
        {
          eventId: randomUUID(),
          type: version === 1 ? 'item.created' : 'item.updated',
          data: {
            record: {
              id: 700,
              sku: 'BIG',
              price,
              weight: '1.000',
              external_id: null,
              created_at: AT,
              updated_at: AT,
              version,
            },
            previous: {},
            deleted: false,
          } satisfies RecordChange,
        },
      ],
    });
    // What issue 23 found stored before bounds existed: a price of 140,000 digits (numeric overflows).
    await store.append(item(1, '9'.repeat(140_000)));
    await store.append(item(2, '1.00'));
    const parked = new ParkedEvents(db.pool);

    const result = await rebuildReadModel(db.pool, store, parked, () => {});
    const listed = await parked.list({ limit: 10, offset: 0 });
    expect({ parked: result.parked, listed: listed.parked }).toEqual({
      parked: 1,
      listed: [
        expect.objectContaining({
          consumerGroup: 'projector',
          streamId: recordStreamId('items', 700),
          version: 1,
          reason: expect.stringMatching(/^22003: /),
          waiting: 1,
        }),
      ],
    });
    expect((await db.pool.query('SELECT 1 FROM read.items WHERE id = 700')).rowCount).toBe(0);
    // Everything else was rebuilt: the person projected before is still there.
    expect((await db.pool.query('SELECT 1 FROM read.people WHERE id = 500')).rowCount).toBe(1);

    // A second rebuild holds the record behind the parked event, as the projector does, parking nothing new.
    const again = await rebuildReadModel(db.pool, store, parked, () => {});
    expect(again.parked).toBe(0);
    expect((await parked.list({ limit: 10, offset: 0 })).parked).toEqual([
      expect.objectContaining({ version: 1, waiting: 1 }),
    ]);
  });
});
