import { inTransaction } from '@ofp/runtime';
import { createTestDatabase, type TestDatabase } from '@ofp/testing';
import { readModelDdl } from './ddl.js';
import { deleteRecord, renderDocuments, writeRecord, writeRecords } from './projection.js';
import {
  createReadSchema,
  notifiedProgress,
  PROJECTION_CHANNEL,
  progressNotification,
  projectedVersions,
} from './read-model.js';
import { items, orders, people, phoneNumberTypes, shipments } from './registry.js';
import { parseQuery } from './query.js';
import { getRecord, searchRecords } from './search.js';
import type { RecordDocument } from './projection.js';

const ORG = 7;
const AT = '2026-11-21T07:30:00.000Z';

function person(id: number, version: number, lastName: string, numbers: string[]): RecordDocument {
  return {
    id,
    first_name: null,
    last_name: lastName,
    email: null,
    company: null,
    phone_numbers: numbers.map((number) => ({ number, phone_number_type: null })),
    external_id: null,
    created_at: AT,
    updated_at: AT,
    version,
  };
}

describe('writeRecord and deleteRecord', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.pool.query(readModelDdl([phoneNumberTypes, people, shipments]));
  });

  afterAll(async () => {
    await db.drop();
  });

  const read = (id: number, org = ORG) => getRecord(db.pool, people, org, id);
  const childRows = async (id: number) =>
    (
      await db.pool.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM read.people__phone_numbers WHERE record_id = $1',
        [id],
      )
    ).rows[0];

  it('can run the read-model DDL again over existing tables', async () => {
    await expect(db.pool.query(readModelDdl([phoneNumberTypes, people, shipments]))).resolves.toBeDefined();
  });

  it('adds the document column to a table from before documents, and renders its rows', async () => {
    await writeRecord(db.pool, people, ORG, person(30, 1, 'Undocumented', ['5551']));
    await db.pool.query('ALTER TABLE read.people DROP COLUMN document');
    await db.pool.query(readModelDdl([phoneNumberTypes, people, shipments]));
    expect(await read(30)).toEqual(person(30, 1, 'Undocumented', ['5551']));
  });

  it("renders a person's document again when a phone number type it shows changes or goes", async () => {
    const pager = (version: number, name: string) => ({
      id: 31,
      name,
      external_id: null,
      created_at: AT,
      updated_at: AT,
      version,
    });
    const shown = (name: string | null) => ({
      ...person(32, 1, 'Paged', []),
      // None shown once the type is deleted, as for none: the document schema's `{id, name}` or null.
      phone_numbers: [{ number: '5551', phone_number_type: name === null ? null : { id: 31, name } }],
    });
    await writeRecord(db.pool, phoneNumberTypes, ORG, pager(1, 'Pager'));
    await writeRecord(db.pool, people, ORG, {
      ...shown('Pager'),
      phone_numbers: [{ number: '5551', phone_number_type: { id: 31 } }],
    });
    expect(await read(32)).toEqual(shown('Pager'));
    await writeRecord(db.pool, phoneNumberTypes, ORG, pager(2, 'Beeper'));
    expect(await read(32)).toEqual(shown('Beeper'));
    await deleteRecord(db.pool, phoneNumberTypes, ORG, 31, 3);
    expect(await read(32)).toEqual(shown(null));
  });

  it('applies a newer version and replaces the child rows', async () => {
    expect(await writeRecord(db.pool, people, ORG, person(1, 1, 'First', ['5551', '5552', '5553']))).toBe(
      true,
    );
    expect(await writeRecord(db.pool, people, ORG, person(1, 2, 'Second', ['5559']))).toBe(true);
    expect(await read(1)).toEqual(person(1, 2, 'Second', ['5559']));
    expect(await childRows(1)).toEqual({ n: 1 });
  });

  it('ignores an older or equal version', async () => {
    await writeRecord(db.pool, people, ORG, person(2, 3, 'Current', ['5551']));
    expect(await writeRecord(db.pool, people, ORG, person(2, 2, 'Older', ['5552', '5553']))).toBe(false);
    expect(await writeRecord(db.pool, people, ORG, person(2, 3, 'Same version', []))).toBe(false);
    expect(await read(2)).toEqual(person(2, 3, 'Current', ['5551']));
  });

  it('deletes a record with its child rows, and a replayed older state does not bring it back', async () => {
    await writeRecord(db.pool, people, ORG, person(3, 1, 'Doomed', ['5551']));
    expect(await deleteRecord(db.pool, people, ORG, 3, 2)).toBe(true);
    expect(await read(3)).toBeUndefined();
    expect(await childRows(3)).toEqual({ n: 0 });
    expect(await writeRecord(db.pool, people, ORG, person(3, 1, 'Doomed', ['5551']))).toBe(false);
    expect(await writeRecord(db.pool, people, ORG, person(3, 2, 'Doomed', ['5551']))).toBe(false);
    expect(await read(3)).toBeUndefined();
  });

  it('applies a state newer than the deletion', async () => {
    await writeRecord(db.pool, people, ORG, person(4, 1, 'Gone', []));
    await deleteRecord(db.pool, people, ORG, 4, 2);
    expect(await writeRecord(db.pool, people, ORG, person(4, 3, 'Back', []))).toBe(true);
    expect(await read(4)).toEqual(person(4, 3, 'Back', []));
  });

  it('ignores a repeated or stale deletion', async () => {
    await writeRecord(db.pool, people, ORG, person(5, 4, 'Kept', []));
    expect(await deleteRecord(db.pool, people, ORG, 5, 4)).toBe(false);
    expect(await read(5)).toEqual(person(5, 4, 'Kept', []));
    expect(await deleteRecord(db.pool, people, ORG, 5, 5)).toBe(true);
    expect(await deleteRecord(db.pool, people, ORG, 5, 5)).toBe(false);
  });

  it('remembers a deletion of a record it never saw', async () => {
    expect(await deleteRecord(db.pool, people, ORG, 6, 2)).toBe(false);
    expect(await writeRecord(db.pool, people, ORG, person(6, 1, 'Late', []))).toBe(false);
  });

  it('never lets another organization overwrite or delete a record', async () => {
    await writeRecord(db.pool, people, ORG, person(8, 1, 'Mine', ['5551']));
    expect(await writeRecord(db.pool, people, ORG + 1, person(8, 2, 'Theirs', []))).toBe(false);
    expect(await deleteRecord(db.pool, people, ORG + 1, 8, 3)).toBe(false);
    expect(await read(8)).toEqual(person(8, 1, 'Mine', ['5551']));
    expect(await writeRecord(db.pool, people, ORG, person(8, 2, 'Still mine', []))).toBe(true);
  });

  it('writes nothing when the caller rolls its transaction back', async () => {
    await expect(
      inTransaction(db.pool, async (client) => {
        await writeRecord(client, people, ORG, person(9, 1, 'Rolled back', ['5551']));
        throw new Error('checkpoint failed');
      }),
    ).rejects.toThrow('checkpoint failed');
    expect(await read(9)).toBeUndefined();
  });

  it("moves its stream's checkpoint in the statement that writes, and writes nothing at a version the checkpoint passed", async () => {
    await createReadSchema(db.pool, 'read', [phoneNumberTypes, people, shipments]);
    const at = (version: number) => ({ checkpoint: { streamId: 'people-60', version } });
    const projected = async () => (await projectedVersions(db.pool, ['people-60'])).get('people-60');
    expect(await writeRecord(db.pool, people, ORG, person(60, 1, 'First', []), at(1))).toBe(true);
    expect(await projected()).toBe(1);
    expect(await writeRecord(db.pool, people, ORG, person(60, 2, 'Redelivered', []), at(1))).toBe(false);
    expect(await read(60)).toEqual(person(60, 1, 'First', []));
    expect(await writeRecord(db.pool, people, ORG, person(60, 2, 'Second', ['5551']), at(2))).toBe(true);
    expect(await read(60)).toEqual(person(60, 2, 'Second', ['5551']));
    // The checkpoint moves with an event whose state is older than the row's: that event is applied.
    expect(await writeRecord(db.pool, people, ORG, person(60, 1, 'Older', []), at(3))).toBe(false);
    expect(await projected()).toBe(3);
    expect(await read(60)).toEqual(person(60, 2, 'Second', ['5551']));
  });

  it('writes several records in one statement, each as writeRecord would, and the records that show them again', async () => {
    const org = 80;
    const at = (id: number, version: number) => ({ checkpoint: { streamId: `people-${id}`, version } });
    const total = async () =>
      (await searchRecords(db.pool, people, org, parseQuery(people, undefined))).total_results;
    await createReadSchema(db.pool, 'read', [phoneNumberTypes, people, shipments]);
    await writeRecord(db.pool, people, org, person(81, 2, 'Stored', ['5551']), at(81, 2));
    await writeRecord(db.pool, people, org, person(82, 1, 'Before', ['5551']), at(82, 1));
    await deleteRecord(db.pool, people, org, 83, 2);
    const statements: string[] = [];
    const client = await db.pool.connect();
    const query = client.query.bind(client);
    try {
      client.query = ((config: unknown, values?: unknown) => {
        statements.push(typeof config === 'string' ? config : (config as { text: string }).text);
        return query(config as string, values as unknown[]);
      }) as typeof client.query;
      expect(
        await writeRecords(client, people, [
          { orgId: org, record: person(84, 1, 'New', []), checkpoint: at(84, 1).checkpoint },
          { orgId: org, record: person(85, 1, 'New too', []), checkpoint: at(85, 1).checkpoint },
          // Redelivered: its stream's checkpoint is there already.
          { orgId: org, record: person(81, 3, 'Redelivered', []), checkpoint: at(81, 2).checkpoint },
          // Deleted at a later version.
          { orgId: org, record: person(83, 1, 'Deleted', []), checkpoint: at(83, 1).checkpoint },
        ]),
      ).toEqual([true, true, false, false]);
    } finally {
      client.query = query;
      client.release();
    }
    // New records without child rows: the upsert alone (a person shows no other person).
    expect(statements).toHaveLength(1);
    expect(await read(84, org)).toEqual(person(84, 1, 'New', []));
    expect(await read(85, org)).toEqual(person(85, 1, 'New too', []));
    expect(await read(81, org)).toEqual(person(81, 2, 'Stored', ['5551']));
    expect(await read(83, org)).toBeUndefined();
    expect(await total()).toBe(4);
    // An update among new records replaces its child rows; another organization's row is not taken.
    expect(
      await writeRecords(
        db.pool,
        people,
        [
          { orgId: org, record: person(82, 2, 'After', ['5552', '5553']) },
          { orgId: org, record: person(86, 1, 'Listed', ['5554']) },
          { orgId: org + 1, record: person(85, 2, 'Taken', []) },
        ],
        {},
      ),
    ).toEqual([true, true, false]);
    expect(await read(82, org)).toEqual(person(82, 2, 'After', ['5552', '5553']));
    expect(await read(86, org)).toEqual(person(86, 1, 'Listed', ['5554']));
    expect(await read(85, org)).toEqual(person(85, 1, 'New too', []));
    expect(await total()).toBe(5);
    // A phone number type written with the person showing it, in either order.
    const pager = { id: 87, name: 'Pager', external_id: null, created_at: AT, updated_at: AT, version: 1 };
    const shows = {
      ...person(88, 1, 'Paged', []),
      phone_numbers: [{ number: '5551', phone_number_type: { id: 87 } }],
    };
    await writeRecords(db.pool, people, [{ orgId: org, record: shows }]);
    await writeRecords(db.pool, phoneNumberTypes, [{ orgId: org, record: pager }]);
    expect(await read(88, org)).toEqual({
      ...shows,
      phone_numbers: [{ number: '5551', phone_number_type: { id: 87, name: 'Pager' } }],
    });
    await expect(
      writeRecords(db.pool, people, [
        { orgId: org, record: person(89, 1, 'Once', []) },
        { orgId: org, record: person(89, 2, 'Twice', []) },
      ]),
    ).rejects.toThrow('a people twice in one call');
  });

  it("announces the streams a batch applied in the notification's payload, or none when they would not fit", async () => {
    const listener = await db.pool.connect();
    const payloads: string[] = [];
    listener.on('notification', ({ payload }) => payloads.push(payload ?? ''));
    try {
      await listener.query(`LISTEN ${PROJECTION_CHANNEL}`);
      const streams = new Map([
        ["people-1'; --", 3],
        ['people-é\\"', 1],
      ]);
      await db.pool.query(progressNotification(streams));
      const many = new Map(Array.from({ length: 500 }, (_, i) => [`people-${1_000_000 + i}`, 1]));
      await db.pool.query(progressNotification(many));
      for (let tries = 0; payloads.length < 2 && tries < 100; tries++)
        await new Promise((resolve) => setTimeout(resolve, 20));
      expect(notifiedProgress(payloads[0]!)).toEqual(streams);
      expect(payloads[1]).toBe('');
      expect(notifiedProgress(payloads[1]!)).toBeUndefined();
    } finally {
      await listener.query('UNLISTEN *');
      listener.release();
    }
  });

  it('renders the document of a new record in its upsert as the table renders it', async () => {
    await writeRecord(db.pool, people, ORG, person(61, 1, 'Single statement', []));
    const stored = await db.pool.query<{ document: unknown }>(
      'SELECT document FROM read.people WHERE id = 61',
    );
    await db.pool.query('UPDATE read.people SET document = NULL WHERE id = 61');
    await renderDocuments(db.pool, people, ORG, [61]);
    const rendered = await db.pool.query<{ document: unknown }>(
      'SELECT document FROM read.people WHERE id = 61',
    );
    expect(stored.rows[0]!.document).toEqual(rendered.rows[0]!.document);
    expect(await read(61)).toEqual(person(61, 1, 'Single statement', []));
  });

  it('renders a new record without child rows in its upsert with its lists empty and its embedded objects null, as the table renders it', async () => {
    await db.pool.query(readModelDdl([orders]));
    await writeRecord(db.pool, orders, ORG, {
      id: 63,
      status: 'pending',
      created_at: AT,
      updated_at: AT,
      version: 1,
    });
    const document = async () =>
      (
        await db.pool.query<{ document: Record<string, unknown> }>(
          'SELECT document FROM read.orders WHERE id = 63',
        )
      ).rows[0]!.document;
    const stored = await document();
    await db.pool.query('UPDATE read.orders SET document = NULL WHERE id = 63');
    await renderDocuments(db.pool, orders, ORG, [63]);
    expect(stored).toEqual(await document());
    expect(stored).toMatchObject({ id: 63, ship_to: null, lines: [] });
  });

  it('replaces lists inside lists', async () => {
    const shipment = (
      version: number,
      packages: { tracking_number: string; lines: { sku: string; quantity: number }[] }[],
    ) => ({
      id: 20,
      fulfillment_order_id: 1,
      status: 'label_created',
      carrier: null,
      service: null,
      shipped_at: AT,
      estimated_delivery_at: null,
      delivered_at: null,
      packages: packages.map((p) => ({ tracking_url: null, weight: null, ...p })),
      external_id: 'wms-20',
      created_at: AT,
      updated_at: AT,
      version,
    });
    await writeRecord(
      db.pool,
      shipments,
      ORG,
      shipment(1, [
        {
          tracking_number: 'T1',
          lines: [
            { sku: 'A', quantity: 1 },
            { sku: 'B', quantity: 2 },
          ],
        },
      ]),
    );
    const next = shipment(2, [
      { tracking_number: 'T2', lines: [] },
      { tracking_number: 'T3', lines: [{ sku: 'C', quantity: 3 }] },
    ]);
    await writeRecord(db.pool, shipments, ORG, next);
    expect(await getRecord(db.pool, shipments, ORG, 20)).toEqual(next);
    const lines = await db.pool.query(
      'SELECT count(*)::int AS n FROM read.shipments__packages__lines WHERE record_id = 20',
    );
    expect(lines.rows[0]).toEqual({ n: 1 });
  });

  it('keeps the count of records that a search without filters answers', async () => {
    const org = 50;
    const total = async () =>
      (await searchRecords(db.pool, people, org, parseQuery(people, undefined))).total_results;
    await writeRecord(db.pool, people, org, person(51, 1, 'One', []));
    await writeRecord(db.pool, people, org, person(52, 1, 'Two', []));
    await writeRecord(db.pool, people, org, person(51, 2, 'One again', []));
    await writeRecord(db.pool, people, org, person(52, 1, 'Two', []));
    expect(await total()).toBe(2);
    await deleteRecord(db.pool, people, org, 52, 2);
    await deleteRecord(db.pool, people, org, 52, 2);
    await writeRecord(db.pool, people, org, person(52, 1, 'Two', []));
    expect(await total()).toBe(1);
    await writeRecord(db.pool, people, org, person(52, 3, 'Two again', []));
    expect(await total()).toBe(2);
  });

  it('stores and renders decimals at the bounds without losing a digit, money with at least 2 after the point', async () => {
    await db.pool.query(readModelDdl([items]));
    const item = (id: number, price: string | null, weight: string | null) => ({
      id,
      sku: `SKU-${id}`,
      name: null,
      description: null,
      barcode: null,
      unit_of_measure: null,
      weight,
      weight_unit: null,
      price,
      currency: null,
      active: true,
      external_id: null,
      created_at: AT,
      updated_at: AT,
      version: 1,
    });
    const written = [
      item(40, '12.50', '1.500'),
      item(41, '12.125', '0.0001'),
      item(42, '999999999999999.9999', '999999999999.9999'),
      item(43, '0.00', '0.000'),
      item(44, null, null),
    ];
    for (const record of written) await writeRecord(db.pool, items, ORG, record);
    for (const record of written) expect(await getRecord(db.pool, items, ORG, record.id)).toEqual(record);
  });

  it('retypes the columns of a read model laid out before the bounds, and keeps what they hold', async () => {
    const old = await createTestDatabase();
    try {
      await old.pool.query(readModelDdl([phoneNumberTypes, people, items, orders]));
      // The layout of before: text, bigint and numeric without bounds.
      await old.pool.query(`ALTER TABLE read.items ALTER COLUMN sku TYPE text COLLATE "C",
        ALTER COLUMN price TYPE numeric, ALTER COLUMN description TYPE text COLLATE "C"`);
      await old.pool.query('ALTER TABLE read.orders__lines ALTER COLUMN quantity TYPE bigint');
      await old.pool.query(
        `INSERT INTO read.items (id, org_id, sku, price, created_at, updated_at, version)
         VALUES (1, $1, 'A', 12.5, now(), now(), 1)`,
        [ORG],
      );
      await old.pool.query(
        `INSERT INTO read.orders (id, org_id, created_at, updated_at, version) VALUES (2, $1, now(), now(), 1);
         INSERT INTO read.orders__lines (org_id, record_id, ordinal, sku, quantity) VALUES (${ORG}, 2, 0, 'A', 3000000000)`.replace(
          '$1',
          String(ORG),
        ),
      );
      const warnings: string[] = [];
      const client = await old.pool.connect();
      client.on('notice', (notice) => {
        if (notice.severity === 'WARNING') warnings.push(notice.message ?? '');
      });
      try {
        await client.query(readModelDdl([phoneNumberTypes, people, items, orders]));
      } finally {
        client.release();
      }
      const types = await old.pool.query<{ table: string; column: string; type: string }>(
        `SELECT c.relname AS table, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type
           FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'read' AND (c.relname, a.attname) IN
                (('items', 'sku'), ('items', 'price'), ('items', 'description'), ('orders__lines', 'quantity'))
          ORDER BY 1, 2`,
      );
      expect(types.rows).toEqual([
        { table: 'items', column: 'description', type: 'character varying(10000)' },
        { table: 'items', column: 'price', type: 'numeric(19,4)' },
        { table: 'items', column: 'sku', type: 'character varying(255)' },
        // A quantity beyond 32 bits, written before the bounds: the table keeps its types.
        { table: 'orders__lines', column: 'quantity', type: 'bigint' },
      ]);
      expect(warnings).toEqual([
        expect.stringContaining('read model table "read"."orders__lines" keeps its column types'),
      ]);
      const collation = await old.pool.query(
        "SELECT collation_name FROM information_schema.columns WHERE table_schema = 'read' AND table_name = 'items' AND column_name = 'sku'",
      );
      expect(collation.rows).toEqual([{ collation_name: 'C' }]);
      const price = await old.pool.query('SELECT price::text FROM read.items WHERE id = 1');
      expect(price.rows).toEqual([{ price: '12.5000' }]);
    } finally {
      await old.drop();
    }
  });

  it('refuses a record without a usable id or version', async () => {
    await expect(
      writeRecord(db.pool, people, ORG, { ...person(10, 1, 'X', []), version: '1' }),
    ).rejects.toThrow('record.version must be a positive integer');
  });
});
