import type { RecordChange, RecordJson } from '@ofp/contracts';
import { EventStore, migrateEventStore, type StoredEvent } from '@ofp/event-store';
import {
  fulfillmentOrders,
  inventory,
  inventoryAdjustments,
  orders,
  shipments,
  type ModelDefinition,
} from '@ofp/models';
import { createTestDatabase, testLogger, type TestDatabase } from '@ofp/testing';
import { ABSENT, decide, type RecordState } from '../domain/record-decider.js';
import { RecordStore } from '../commands/record-store.js';
import { UniqueValues } from '../commands/unique-values.js';
import { migrateApi } from '../module.js';
import { InventoryManager } from './inventory-manager.js';
import { OrderProgressManager } from './order-progress-manager.js';

// The process managers against a real Postgres: each event's commands apply exactly once however
// often, and however concurrently, the bus delivers it; concurrent events lose no update.

const ORG = 1;
const AT = '2026-11-21T07:30:00.000Z';
const system = { kind: 'system' } as const;
const clock = () => new Date(AT);

describe('process managers', () => {
  let db: TestDatabase;
  let store: EventStore;
  let records: RecordStore;
  let inventoryManager: InventoryManager;
  let orderProgress: OrderProgressManager;
  let nextId = 1000;
  const TEST_METADATA = { actor: 'test', requestId: 'test' };

  beforeAll(async () => {
    db = await createTestDatabase();
    const logger = testLogger();
    await migrateEventStore(db.pool, logger);
    await migrateApi(db.pool, logger);
    store = new EventStore(db.pool, { outbox: false });
    records = new RecordStore(db.pool, store);
    const unique = new UniqueValues(db.pool);
    inventoryManager = new InventoryManager(db.pool, store, records, unique, clock);
    orderProgress = new OrderProgressManager(db.pool, store, records, clock);
  });

  afterAll(async () => {
    await db.drop();
  });

  /** Creates or updates a record through the decider and returns its stored event, as the bus delivers it. */
  async function recorded(
    model: ModelDefinition,
    fields: Record<string, unknown>,
    id = nextId++,
  ): Promise<StoredEvent> {
    const state: RecordState = await records.load(model, id, ORG);
    const { events } = decide(
      model,
      state.status === 'absent'
        ? { kind: 'create', id, fields, at: AT, by: system }
        : { kind: 'update', fields, at: AT, by: system },
      state,
    );
    await store.appendToStreams([records.appendOf({ model, orgId: ORG, id, state, events }, TEST_METADATA)]);
    return (await store.readStreamHead(`${model.name}-${id}`))!;
  }

  /** Creates a shipment and returns its fulfillment order's event, which the same transaction appended. */
  async function ship(foId: number, lines: { sku: string; quantity: number }[]): Promise<StoredEvent> {
    const fo = {
      model: fulfillmentOrders,
      id: foId,
      state: await records.load(fulfillmentOrders, foId, ORG),
    };
    const id = nextId++;
    const fields = { fulfillment_order_id: foId, packages: [{ lines }] };
    const decision = decide(shipments, { kind: 'create', id, fields, at: AT, by: system }, ABSENT, fo);
    await store.appendToStreams([
      records.appendOf(
        { model: shipments, orgId: ORG, id, state: ABSENT, events: decision.events },
        TEST_METADATA,
      ),
      records.appendOf({ ...fo, orgId: ORG, events: decision.related!.events }, TEST_METADATA),
    ]);
    return (await store.readStreamHead(`${fulfillmentOrders.name}-${foId}`))!;
  }

  async function stockOf(sku: string): Promise<{ record: RecordJson; version: number } | undefined> {
    const { rows } = await db.pool.query<{ data: RecordChange; version: number }>(
      `SELECT data, version FROM es.events WHERE stream_type = $1 AND data->'record'->>'sku' = $2
        ORDER BY version DESC LIMIT 1`,
      [inventory.name, sku],
    );
    return rows[0] && { record: rows[0].data.record, version: rows[0].version };
  }

  it('applies an adjustment once however often and however concurrently it is delivered', async () => {
    const event = await recorded(inventoryAdjustments, { sku: 'ONCE', warehouse: 'W', quantity_delta: 7 });
    await inventoryManager.handle(event);
    await Promise.all(Array.from({ length: 5 }, () => inventoryManager.handle(event)));
    await inventoryManager.handle(event);
    expect(await stockOf('ONCE')).toMatchObject({
      version: 1,
      record: { sku: 'ONCE', warehouse: 'W', on_hand: 7, committed: 0, available: 7, inbound: 0 },
    });
  });

  it('loses no update when events of one sku are handled concurrently', async () => {
    const events = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        recorded(inventoryAdjustments, { sku: 'MANY', warehouse: 'W', quantity_delta: i + 1 }),
      ),
    );
    await Promise.all(events.map((event) => inventoryManager.handle(event)));
    await Promise.all(events.map((event) => inventoryManager.handle(event)));
    expect(await stockOf('MANY')).toMatchObject({ version: 30, record: { on_hand: 465, available: 465 } });
  });

  it('commits a fulfillment order’s quantities once', async () => {
    const event = await recorded(fulfillmentOrders, {
      warehouse: 'W',
      lines: [{ sku: 'COMMIT', quantity: 4 }],
    });
    await inventoryManager.handle(event);
    await inventoryManager.handle(event);
    expect(await stockOf('COMMIT')).toMatchObject({
      version: 1,
      record: { on_hand: 0, committed: 4, available: -4 },
    });
  });

  it('moves an order to fulfilled once its fulfillment orders have shipped, once per event', async () => {
    const order = await recorded(orders, {
      order_number: 'SO-PM',
      status: 'open',
      lines: [{ sku: 'A', quantity: 3 }],
    });
    const orderId = (order.data as RecordChange).record.id;
    const foId = nextId++;
    const created = await recorded(
      fulfillmentOrders,
      { order_id: orderId, lines: [{ sku: 'A', quantity: 3 }] },
      foId,
    );
    await orderProgress.handle(created);
    const shipped = await ship(foId, [{ sku: 'A', quantity: 3 }]);
    await Promise.all([orderProgress.handle(shipped), orderProgress.handle(shipped)]);
    await orderProgress.handle(shipped);
    const head = await store.readStreamHead(`orders-${orderId}`);
    expect(head).toMatchObject({
      version: 2,
      type: 'order.updated',
      data: { record: { status: 'fulfilled' } },
    });
  });
});
