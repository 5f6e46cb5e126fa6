import { createTestDatabase, oracleSearch, type TestDatabase } from '@ofp/testing';
import { readModelDdl } from './ddl.js';
import type { ModelDefinition } from './fields.js';
import { writeRecord } from './projection.js';
import { parseQuery } from './query.js';
import { orders, people, phoneNumberTypes, shipments } from './registry.js';
import { getRecord, searchRecords } from './search.js';
import type { RecordDocument } from './projection.js';

const ORG = 1;
const OTHER_ORG = 2;
const AT = '2026-11-21T07:30:00.000Z';

const metadata = (id: number, version = 1) => ({
  id,
  external_id: null,
  created_at: AT,
  updated_at: AT,
  version,
});
const type = (id: number, name: string, version = 1) => ({ ...metadata(id, version), name });
const phone = (number: string, phoneType: { id: number; name: string } | null) => ({
  number,
  phone_number_type: phoneType && { id: phoneType.id, name: phoneType.name },
});

const work = type(1, 'Work');
const home = type(2, 'Home');
const mobile = type(3, 'Mobile');
const fax = type(4, 'Fax');
const otherWork = type(11, 'Work');

function person(
  id: number,
  first: string | null,
  last: string,
  more: Partial<RecordDocument> = {},
): RecordDocument {
  return {
    ...metadata(id),
    first_name: first,
    last_name: last,
    email: null,
    company: null,
    phone_numbers: [],
    ...more,
  };
}

const ada = person(1, 'Ada', 'Lovelace', {
  email: 'ada@example.com',
  phone_numbers: [phone('555100', work), phone('555101', home)],
});
const alan = person(2, 'Alan', 'Turing', {
  company: 'Bletchley',
  phone_numbers: [phone('555200', home), phone('555100', mobile)],
});
const grace = person(3, 'Grace', 'Hopper', { created_at: '2026-11-20T00:00:00.000Z' });
const zuse = person(4, null, 'Zuse', { phone_numbers: [phone('555300', null)] });
const lowerAda = person(5, 'ada', 'lovelace', { phone_numbers: [phone('555100', work)] });
const edouard = person(6, 'Édouard', 'Lucas', { company: 'Lycée', phone_numbers: [phone('555400', fax)] });
const orgPeople = [ada, alan, grace, zuse, lowerAda, edouard];

// Another organization, with lookalike rows; one phone even points at the first org's type.
const otherAda = person(101, 'Ada', 'Lovelace', { phone_numbers: [phone('555100', otherWork)] });
const strayReference = person(102, 'Stray', 'Reference', { phone_numbers: [phone('555999', work)] });

const address = (country: string) => ({
  name: 'Dock',
  company: null,
  address1: '1 Quay',
  address2: null,
  city: 'Port',
  state: null,
  postal_code: '1000',
  country,
  phone: null,
  email: null,
});
const order = (id: number, shipTo: RecordDocument | null, lines: [string, number][]): RecordDocument => ({
  ...metadata(id),
  order_number: `SO-${id}`,
  status: 'open',
  customer_id: 1,
  currency: 'USD',
  total: '10.00',
  requested_ship_date: '2026-12-01',
  anticipated_ship_date: null,
  shipping_method: null,
  notes: null,
  ship_to: shipTo,
  lines: lines.map(([sku, quantity]) => ({ item_id: null, sku, quantity, unit_price: '5.00' })),
});
const orderRecords = [
  order(201, address('US'), [
    ['A', 1],
    ['B', 5],
  ]),
  order(202, null, [['A', 5]]),
  order(203, address('CA'), []),
];

const shipment = (id: number, packages: [string, [string, number][]][]): RecordDocument => ({
  ...metadata(id),
  fulfillment_order_id: 1,
  status: 'in_transit',
  carrier: 'UPS',
  service: null,
  shipped_at: '2026-11-21T10:00:00.000Z',
  estimated_delivery_at: null,
  delivered_at: null,
  packages: packages.map(([tracking, lines]) => ({
    tracking_number: tracking,
    tracking_url: null,
    weight: '1.250',
    lines: lines.map(([sku, quantity]) => ({ sku, quantity })),
  })),
});
const shipmentRecords = [
  shipment(301, [
    ['T1', [['A', 1]]],
    ['T2', [['B', 2]]],
  ]),
  shipment(302, [['T3', [['A', 2]]]]),
];

describe('searches over the read model', () => {
  let db: TestDatabase;
  const current = new Map<string, RecordDocument[]>();

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.pool.query(readModelDdl([phoneNumberTypes, people, orders, shipments]));
    const writes: [ModelDefinition, number, RecordDocument][] = [
      ...[work, home, mobile, fax].map((record): [ModelDefinition, number, RecordDocument] => [
        phoneNumberTypes,
        ORG,
        record,
      ]),
      [phoneNumberTypes, OTHER_ORG, otherWork],
      ...orgPeople.map((record): [ModelDefinition, number, RecordDocument] => [people, ORG, record]),
      [people, OTHER_ORG, otherAda],
      [people, OTHER_ORG, strayReference],
      ...orderRecords.map((record): [ModelDefinition, number, RecordDocument] => [orders, ORG, record]),
      ...shipmentRecords.map((record): [ModelDefinition, number, RecordDocument] => [shipments, ORG, record]),
    ];
    for (const [model, org, record] of writes) await writeRecord(db.pool, model, org, record);
    current.set(phoneNumberTypes.name, [work, home, mobile, fax]);
    current.set(people.name, orgPeople);
    current.set(orders.name, orderRecords);
    current.set(shipments.name, shipmentRecords);
  });

  afterAll(async () => {
    await db.drop();
  });

  const world = (name: string) => current.get(name) ?? [];

  async function search(model: ModelDefinition, q: unknown, org = ORG) {
    return searchRecords(db.pool, model, org, parseQuery(model, JSON.stringify(q)));
  }

  async function idsOf(model: ModelDefinition, q: unknown, org = ORG): Promise<number[]> {
    return (await search(model, q, org)).results.map((record) => record.id as number);
  }

  const where = (...filters: [string, string, unknown][]) => ({
    filters: filters.map(([operand, operator, value]) => ({ operand, operator, value })),
  });

  describe('renders records exactly as they were written', () => {
    it.each([
      [people, ada],
      [people, zuse],
      [orders, orderRecords[0]!],
      [orders, orderRecords[1]!],
      [shipments, shipmentRecords[0]!],
    ])('%# by id', async (model, record) => {
      expect(await getRecord(db.pool, model, ORG, record.id as number)).toEqual(record);
    });

    it('in searches, in order', async () => {
      const found = await search(people, { order: [{ column: 'last_name' }], limit: 2 });
      expect(found).toEqual({ total_results: 6, count: 2, results: [grace, ada] });
    });
  });

  it('shows the current name of a phone number type', async () => {
    await writeRecord(db.pool, phoneNumberTypes, ORG, type(3, 'Cell', 2));
    try {
      expect(await getRecord(db.pool, people, ORG, 2)).toMatchObject({
        phone_numbers: [
          phone('555200', home),
          { number: '555100', phone_number_type: { id: 3, name: 'Cell' } },
        ],
      });
      expect(await idsOf(people, where(['phone_numbers.phone_number_type.name', '=', 'Cell']))).toEqual([2]);
    } finally {
      await writeRecord(db.pool, phoneNumberTypes, ORG, type(3, 'Mobile', 3));
    }
  });

  describe('filters', () => {
    it.each<[string, [string, string, unknown][], number[]]>([
      ['= on a string, case-sensitive', [['first_name', '=', 'Ada']], [1]],
      ['!= leaves out null columns', [['first_name', '!=', 'Ada']], [2, 3, 5, 6]],
      ['= null', [['first_name', '=', null]], [4]],
      ['!= null', [['company', '!=', null]], [2, 6]],
      ['> by byte order', [['first_name', '>', 'Z']], [5, 6]],
      ['<= by byte order', [['first_name', '<=', 'Alan']], [1, 2]],
      ['>= on an integer', [['id', '>=', 5]], [5, 6]],
      ['< on a timestamp', [['created_at', '<', AT]], [3]],
      ['in', [['last_name', 'in', ['Turing', 'Zuse', 'Nobody']]], [2, 4]],
      ['in []', [['id', 'in', []]], []],
      ['not in leaves out null columns', [['first_name', 'not in', ['Ada', 'Alan']]], [3, 5, 6]],
      [
        'not in [] matches everything, null columns included',
        [['first_name', 'not in', []]],
        [1, 2, 3, 4, 5, 6],
      ],
      [
        'filters are ANDed',
        [
          ['last_name', '>=', 'L'],
          ['email', '=', null],
        ],
        [2, 4, 5, 6],
      ],
      ['a dotted filter', [['phone_numbers.number', '=', '555100']], [1, 2, 5]],
      ['a chained dotted filter', [['phone_numbers.phone_number_type.name', '=', 'Fax']], [6]],
      [
        'a dotted != never matches records without related records',
        [['phone_numbers.number', '!=', '0']],
        [1, 2, 4, 5, 6],
      ],
      [
        'a chained != never matches through a missing reference',
        [['phone_numbers.phone_number_type.name', '!=', 'Work']],
        [1, 2, 6],
      ],
      [
        'two dotted filters on the same relation test the same related record',
        [
          ['phone_numbers.number', '=', '555100'],
          ['phone_numbers.phone_number_type.name', '=', 'Home'],
        ],
        [],
      ],
      [
        'the same phone number: a work phone 555100',
        [
          ['phone_numbers.phone_number_type.name', '=', 'Work'],
          ['phone_numbers.number', '=', '555100'],
        ],
        [1, 5],
      ],
      [
        'a dotted filter through a reference by id',
        [
          ['phone_numbers.phone_number_type.id', 'in', [2, 4]],
          ['phone_numbers.number', '>', '5552'],
        ],
        [2, 6],
      ],
    ])('%s', async (_case, filters, expected) => {
      expect(await idsOf(people, where(...filters))).toEqual(expected);
      expect(oracleSearch(people, world, parseQuery(people, JSON.stringify(where(...filters)))).ids).toEqual(
        expected,
      );
    });

    it.each<[string, ModelDefinition, [string, string, unknown][], number[]]>([
      [
        'same line: sku A with quantity 5',
        orders,
        [
          ['lines.sku', '=', 'A'],
          ['lines.quantity', '=', 5],
        ],
        [202],
      ],
      [
        'different relations: shipped to the US with a line of B',
        orders,
        [
          ['ship_to.country', '=', 'US'],
          ['lines.sku', '=', 'B'],
        ],
        [201],
      ],
      ['an embedded object that is absent never matches', orders, [['ship_to.country', '!=', 'US']], [203]],
      ['a date', orders, [['requested_ship_date', '=', '2026-12-01']], [201, 202, 203]],
      [
        'same package: tracking T1 with a line of B',
        shipments,
        [
          ['packages.tracking_number', '=', 'T1'],
          ['packages.lines.sku', '=', 'B'],
        ],
        [],
      ],
      [
        'same package line: A with quantity 2',
        shipments,
        [
          ['packages.lines.sku', '=', 'A'],
          ['packages.lines.quantity', '=', 2],
        ],
        [302],
      ],
      ['a decimal compared as a number', shipments, [['packages.weight', '=', 1.25]], [301, 302]],
    ])('%s', async (_case, model, filters, expected) => {
      expect(await idsOf(model, where(...filters))).toEqual(expected);
      expect(oracleSearch(model, world, parseQuery(model, JSON.stringify(where(...filters)))).ids).toEqual(
        expected,
      );
    });
  });

  describe('order and pages', () => {
    it.each<[string, unknown, number[]]>([
      ['by id when no order is given', {}, [1, 2, 3, 4, 5, 6]],
      ['strings by byte order, nulls last', { order: [{ column: 'first_name' }] }, [1, 2, 3, 5, 6, 4]],
      [
        'descending, nulls first',
        { order: [{ column: 'first_name', direction: 'desc' }] },
        [4, 6, 5, 3, 2, 1],
      ],
      [
        'by precedence, then id',
        { order: [{ column: 'email', direction: 'desc' }, { column: 'created_at' }] },
        [3, 2, 4, 5, 6, 1],
      ],
      [
        'ties broken by id ascending, also descending',
        { order: [{ column: 'created_at', direction: 'desc' }] },
        [1, 2, 4, 5, 6, 3],
      ],
      ['with limit and offset', { order: [{ column: 'last_name' }], limit: 2, offset: 2 }, [6, 2]],
    ])('%s', async (_case, q, expected) => {
      expect(await idsOf(people, q)).toEqual(expected);
    });

    it('answers total_results for an offset past the end', async () => {
      expect(
        await search(people, { offset: 100, filters: [{ operand: 'id', operator: '>', value: 1 }] }),
      ).toEqual({ total_results: 5, count: 0, results: [] });
    });

    it('answers zero for no match', async () => {
      expect(await search(people, where(['id', '=', 999]))).toEqual({
        total_results: 0,
        count: 0,
        results: [],
      });
    });
  });

  describe('tenancy', () => {
    it('never shows another organization rows', async () => {
      expect(await search(people, {}, OTHER_ORG)).toMatchObject({ total_results: 2 });
      expect(await idsOf(people, where(['last_name', '=', 'Lovelace']), OTHER_ORG)).toEqual([101]);
      expect(await getRecord(db.pool, people, OTHER_ORG, 1)).toBeUndefined();
      expect(await getRecord(db.pool, people, ORG, 101)).toBeUndefined();
    });

    it('keeps dotted filters and references inside the organization', async () => {
      const typed = where(['phone_numbers.phone_number_type.name', '=', 'Work']);
      expect(await idsOf(people, typed, OTHER_ORG)).toEqual([101]);
      expect(await getRecord(db.pool, people, OTHER_ORG, 102)).toMatchObject({
        phone_numbers: [{ number: '555999', phone_number_type: null }],
      });
    });
  });
});
