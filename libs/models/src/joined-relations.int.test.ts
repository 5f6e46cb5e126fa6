import { createTestDatabase, type TestDatabase } from '@ofp/testing';
import { readModelDdl } from './ddl.js';
import type { ModelDefinition } from './fields.js';
import { writeRecord } from './projection.js';
import { parseQuery } from './query.js';
import { fulfillmentOrders, inventory, items, shipments } from './registry.js';
import { getRecord, searchRecords } from './search.js';
import type { RecordDocument } from './projection.js';

// Joined relations: a fulfillment order's `shipments` (by `shipments.fulfillment_order_id`) and an
// inventory record's `item` (by sku), followed by dot syntax but never stored with the record.

const ORG = 1;
const OTHER_ORG = 2;
const AT = '2026-11-21T07:30:00.000Z';
const metadata = (id: number) => ({ id, external_id: null, created_at: AT, updated_at: AT, version: 1 });

const fulfillmentOrder = (id: number): RecordDocument => ({
  ...metadata(id),
  order_id: null,
  warehouse: 'MAIN',
  status: 'partially_shipped',
  requested_ship_date: null,
  anticipated_ship_date: null,
  shipping_method: null,
  ship_to: null,
  lines: [{ sku: 'A', quantity: 5, quantity_shipped: 1 }],
});

const shipment = (id: number, fulfillmentOrderId: number, packages: [string, string][]): RecordDocument => ({
  ...metadata(id),
  fulfillment_order_id: fulfillmentOrderId,
  status: 'label_created',
  carrier: 'UPS',
  service: null,
  shipped_at: null,
  estimated_delivery_at: null,
  delivered_at: null,
  packages: packages.map(([tracking, sku]) => ({
    tracking_number: tracking,
    tracking_url: null,
    weight: null,
    lines: [{ sku, quantity: 1 }],
  })),
});

const item = (id: number, sku: string, name: string): RecordDocument => ({
  ...metadata(id),
  sku,
  name,
  description: null,
  barcode: null,
  unit_of_measure: null,
  weight: null,
  weight_unit: null,
  price: null,
  currency: null,
  active: true,
});

const stock = (id: number, sku: string): RecordDocument => ({
  ...metadata(id),
  item_id: null,
  sku,
  warehouse: 'MAIN',
  on_hand: 3,
  committed: 1,
  available: 2,
  inbound: 0,
});

describe('joined relations', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.pool.query(readModelDdl([fulfillmentOrders, shipments, items, inventory]));
    const writes: [ModelDefinition, number, RecordDocument][] = [
      [fulfillmentOrders, ORG, fulfillmentOrder(1)],
      [fulfillmentOrders, ORG, fulfillmentOrder(2)],
      [
        shipments,
        ORG,
        shipment(11, 1, [
          ['T1', 'A'],
          ['T2', 'B'],
        ]),
      ],
      [shipments, ORG, shipment(12, 1, [['T3', 'B']])],
      // Another organization's shipment naming the first organization's fulfillment order.
      [shipments, OTHER_ORG, shipment(13, 2, [['T9', 'A']])],
      [items, ORG, item(21, 'A', 'Widget')],
      [items, OTHER_ORG, item(22, 'B', 'Widget')],
      [inventory, ORG, stock(31, 'A')],
      [inventory, ORG, stock(32, 'B')],
    ];
    for (const [model, org, record] of writes) await writeRecord(db.pool, model, org, record);
  });

  afterAll(async () => {
    await db.drop();
  });

  async function idsOf(model: ModelDefinition, filters: [string, string, unknown][], org = ORG) {
    const q = { filters: filters.map(([operand, operator, value]) => ({ operand, operator, value })) };
    const found = await searchRecords(db.pool, model, org, parseQuery(model, JSON.stringify(q)));
    return { ids: found.results.map((record) => record.id), total: found.total_results };
  }

  it('finds a fulfillment order by its shipments’ package tracking numbers', async () => {
    expect(await idsOf(fulfillmentOrders, [['shipments.packages.tracking_number', '=', 'T3']])).toEqual({
      ids: [1],
      total: 1,
    });
    expect(await idsOf(fulfillmentOrders, [['shipments.carrier', '=', 'UPS']])).toEqual({
      ids: [1],
      total: 1,
    });
  });

  it('tests filters on the same joined path against the same package', async () => {
    const samePackage = (sku: string): [string, string, unknown][] => [
      ['shipments.packages.tracking_number', '=', 'T1'],
      ['shipments.packages.lines.sku', '=', sku],
    ];
    expect((await idsOf(fulfillmentOrders, samePackage('A'))).ids).toEqual([1]);
    expect((await idsOf(fulfillmentOrders, samePackage('B'))).ids).toEqual([]);
  });

  it('never matches a record without related records, nor through another organization’s', async () => {
    expect((await idsOf(fulfillmentOrders, [['shipments.carrier', '!=', 'none']])).ids).toEqual([1]);
    expect((await idsOf(fulfillmentOrders, [['shipments.packages.tracking_number', '=', 'T9']])).ids).toEqual(
      [],
    );
  });

  it('does not render joined relations', async () => {
    expect(await getRecord(db.pool, fulfillmentOrders, ORG, 1)).toEqual(fulfillmentOrder(1));
  });

  it('finds inventory by its item’s columns, in its organization', async () => {
    expect((await idsOf(inventory, [['item.name', '=', 'Widget']])).ids).toEqual([31]);
  });
});
