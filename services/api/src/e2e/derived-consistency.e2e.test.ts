import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import {
  createIntegrator,
  RUN_MODES,
  startTestPlatform,
  stockOf,
  type Integrator,
  type RunningPlatform,
  UNLIMITED_RATE,
} from '@ofp/testing';

// Read-your-writes covers what a write derives (API.md §5, issue 12): random sequences of writes
// across purchase orders (receiving), orders with fulfillment orders (holds, cancels), shipments
// (cancels) and inventory adjustments; after every response, without waiting or polling, the
// inventory of every (sku, warehouse) the write touched and the status of every record it moved
// equal what this file computes from the rules of API.md §6 alone.

/** Sequences per run mode; `DERIVED_SEQUENCES=2000` is the nightly size (docs/testing.md). */
const SEQUENCES = Number(process.env.DERIVED_SEQUENCES ?? 200);
const SKUS = ['A', 'B'];
const WAREHOUSES = ['EAST', 'WEST'];
/** A (sku, warehouse) that has no inventory record yet. */
const NO_STOCK = { on_hand: 0, committed: 0, available: 0, inbound: 0 };

interface Line {
  readonly sku: number;
  readonly quantity: number;
}

/** What a step picks among the records of its kind that exist: an index taken modulo their count. */
type Step =
  | { kind: 'adjust'; sku: number; warehouse: number; delta: number }
  | { kind: 'createPurchaseOrder'; warehouse: number; lines: Line[] }
  | { kind: 'openPurchaseOrder'; pick: number }
  | { kind: 'receive'; pick: number; line: number; quantity: number }
  | { kind: 'cancelPurchaseOrder'; pick: number }
  | { kind: 'createFulfillment'; warehouse: number; lines: Line[]; orderExtra: number }
  | { kind: 'hold'; pick: number }
  | { kind: 'release'; pick: number }
  | { kind: 'cancelFulfillment'; pick: number }
  | { kind: 'ship'; pick: number; line: number; quantity: number }
  | { kind: 'cancelShipment'; pick: number };

const index = fc.nat({ max: 7 });
const lines = fc.array(
  fc.record({ sku: fc.nat({ max: SKUS.length - 1 }), quantity: fc.integer({ min: 1, max: 6 }) }),
  { minLength: 1, maxLength: 2 },
);
const stepArbitrary: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    kind: fc.constant('adjust' as const),
    sku: fc.nat({ max: SKUS.length - 1 }),
    warehouse: fc.nat({ max: WAREHOUSES.length - 1 }),
    delta: fc.integer({ min: -5, max: 20 }),
  }),
  fc.record({
    kind: fc.constant('createPurchaseOrder' as const),
    warehouse: fc.nat({ max: WAREHOUSES.length - 1 }),
    lines,
  }),
  fc.record({ kind: fc.constant('openPurchaseOrder' as const), pick: index }),
  fc.record({
    kind: fc.constant('receive' as const),
    pick: index,
    line: fc.nat({ max: 1 }),
    quantity: fc.integer({ min: 1, max: 6 }),
  }),
  fc.record({ kind: fc.constant('cancelPurchaseOrder' as const), pick: index }),
  fc.record({
    kind: fc.constant('createFulfillment' as const),
    warehouse: fc.nat({ max: WAREHOUSES.length - 1 }),
    lines,
    orderExtra: fc.nat({ max: 2 }),
  }),
  fc.record({ kind: fc.constant('hold' as const), pick: index }),
  fc.record({ kind: fc.constant('release' as const), pick: index }),
  fc.record({ kind: fc.constant('cancelFulfillment' as const), pick: index }),
  fc.record({
    kind: fc.constant('ship' as const),
    pick: index,
    line: fc.nat({ max: 1 }),
    quantity: fc.integer({ min: 1, max: 6 }),
  }),
  fc.record({ kind: fc.constant('cancelShipment' as const), pick: index }),
);

// The model: the records of one sequence as API.md §6 says they must be.

interface PurchaseOrder {
  id: number;
  warehouse: string;
  status: 'draft' | 'open' | 'cancelled';
  lines: { sku: string; quantity: number; received: number }[];
}
interface Fulfillment {
  id: number;
  orderId: number;
  orderQuantity: number;
  warehouse: string;
  /** The client's status; the shipped quantities decide the rest. */
  status: 'open' | 'on_hold' | 'cancelled';
  heldFrom?: string;
  everShipped: boolean;
  lines: { sku: string; quantity: number; shipped: number }[];
}
interface Shipment {
  id: number;
  fulfillment: Fulfillment;
  line: number;
  quantity: number;
  cancelled: boolean;
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

function purchaseOrderStatus(order: PurchaseOrder): string {
  if (order.status !== 'open') return order.status;
  const received = sum(order.lines.map((line) => line.received));
  const ordered = sum(order.lines.map((line) => line.quantity));
  return received === 0 ? 'open' : received === ordered ? 'received' : 'partially_received';
}

function fulfillmentStatus(fo: Fulfillment): string {
  if (fo.status !== 'open') return fo.status;
  const shipped = sum(fo.lines.map((line) => line.shipped));
  const ordered = sum(fo.lines.map((line) => line.quantity));
  if (shipped === 0) return fo.everShipped ? 'in_progress' : 'open';
  return shipped === ordered ? 'shipped' : 'partially_shipped';
}

function orderStatus(fo: Fulfillment): string {
  const shipped = sum(fo.lines.map((line) => line.shipped));
  const held = fo.status === 'cancelled' ? shipped : sum(fo.lines.map((line) => line.quantity));
  if (shipped === 0) return 'open';
  return shipped >= Math.max(fo.orderQuantity, held) ? 'fulfilled' : 'partially_fulfilled';
}

class Model {
  readonly adjustments = new Map<string, number>();
  readonly purchaseOrders: PurchaseOrder[] = [];
  readonly fulfillments: Fulfillment[] = [];
  readonly shipments: Shipment[] = [];

  stock(sku: string, warehouse: string) {
    const on =
      (this.adjustments.get(`${sku}/${warehouse}`) ?? 0) +
      sum(
        this.purchaseOrders
          .filter((po) => po.warehouse === warehouse)
          .flatMap((po) => po.lines.filter((line) => line.sku === sku).map((line) => line.received)),
      ) -
      sum(
        this.fulfillments
          .filter((fo) => fo.warehouse === warehouse)
          .flatMap((fo) => fo.lines.filter((line) => line.sku === sku).map((line) => line.shipped)),
      );
    const committed = sum(
      this.fulfillments
        .filter((fo) => fo.warehouse === warehouse && fo.status !== 'cancelled')
        .flatMap((fo) =>
          fo.lines.filter((line) => line.sku === sku).map((line) => line.quantity - line.shipped),
        ),
    );
    const inbound = sum(
      this.purchaseOrders
        .filter((po) => po.warehouse === warehouse && po.status === 'open')
        .flatMap((po) =>
          po.lines.filter((line) => line.sku === sku).map((line) => line.quantity - line.received),
        ),
    );
    return { on_hand: on, committed, available: on - committed, inbound };
  }
}

/** What one step checks after its response: stocks by (sku, warehouse), statuses by path. */
interface Touched {
  stocks: [string, string][];
  statuses: [string, string][];
}

type Json = Record<string, unknown> & { id: number; status?: string };

describe.each(RUN_MODES)('what a write derives is visible with its response ($mode)', ({ mode }) => {
  let platform: RunningPlatform;
  let acme: Integrator;

  beforeAll(async () => {
    // One client sends every step as fast as the platform answers: more than the 100 requests a second
    // its rate limit refills (a fast machine answered 429 after about 1,500 of them).
    platform = await startTestPlatform(mode, {
      KAFKA_TOPIC_PREFIX: `e2e.${randomUUID().slice(0, 8)}.`,
      ...UNLIMITED_RATE,
    });
    acme = await createIntegrator(platform, { name: 'Derived' });
  }, 180_000);
  afterAll(async () => {
    await platform?.stop();
  }, 60_000);

  async function write(method: string, path: string, body: unknown): Promise<Json> {
    const response = await acme.request<Json>(method, path, { body });
    if (response.status !== 200 && response.status !== 201)
      throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(response.body.errors)}`);
    return response.body.results;
  }

  /** Runs one step on the platform and the model; undefined when the model has nothing it applies to. */
  async function run(model: Model, step: Step, skus: string[]): Promise<Touched | undefined> {
    const pick = <T>(candidates: T[], at: number): T | undefined =>
      candidates.length === 0 ? undefined : candidates[at % candidates.length];
    const shippable = (fo: Fulfillment) =>
      ['open', 'in_progress', 'partially_shipped'].includes(fulfillmentStatus(fo));
    const foTouched = (fo: Fulfillment): Touched => ({
      stocks: fo.lines.map((line) => [line.sku, fo.warehouse]),
      statuses: [
        [`/v2/fulfillment_orders/${fo.id}`, fulfillmentStatus(fo)],
        [`/v2/orders/${fo.orderId}`, orderStatus(fo)],
      ],
    });
    const poTouched = (po: PurchaseOrder): Touched => ({
      stocks: po.lines.map((line) => [line.sku, po.warehouse]),
      statuses: [[`/v2/purchase_orders/${po.id}`, purchaseOrderStatus(po)]],
    });
    switch (step.kind) {
      case 'adjust': {
        const [sku, warehouse] = [skus[step.sku]!, WAREHOUSES[step.warehouse]!];
        await write('POST', '/v2/inventory_adjustments', {
          sku,
          warehouse,
          quantity_delta: step.delta,
          reason: 'count',
        });
        model.adjustments.set(
          `${sku}/${warehouse}`,
          (model.adjustments.get(`${sku}/${warehouse}`) ?? 0) + step.delta,
        );
        return { stocks: [[sku, warehouse]], statuses: [] };
      }
      case 'createPurchaseOrder': {
        const warehouse = WAREHOUSES[step.warehouse]!;
        const created = await write('POST', '/v2/purchase_orders', {
          po_number: `PO-${randomUUID()}`,
          vendor_name: 'Parts',
          warehouse,
          lines: step.lines.map((line) => ({
            sku: skus[line.sku],
            quantity: line.quantity,
            unit_cost: '1.00',
          })),
        });
        const po: PurchaseOrder = {
          id: created.id,
          warehouse,
          status: 'draft',
          lines: step.lines.map((line) => ({ sku: skus[line.sku]!, quantity: line.quantity, received: 0 })),
        };
        model.purchaseOrders.push(po);
        return poTouched(po);
      }
      case 'openPurchaseOrder': {
        const po = pick(
          model.purchaseOrders.filter((each) => each.status === 'draft'),
          step.pick,
        );
        if (!po) return undefined;
        await write('PUT', `/v2/purchase_orders/${po.id}`, { status: 'open' });
        po.status = 'open';
        return poTouched(po);
      }
      case 'receive': {
        const receiving = model.purchaseOrders.filter(
          (each) => each.status === 'open' && purchaseOrderStatus(each) !== 'received',
        );
        const po = pick(receiving, step.pick);
        if (!po) return undefined;
        const line = po.lines[step.line % po.lines.length]!;
        const quantity = Math.min(step.quantity, line.quantity - line.received);
        if (quantity === 0) return undefined;
        line.received += quantity;
        await write('PUT', `/v2/purchase_orders/${po.id}`, {
          lines: po.lines.map((each) => ({
            sku: each.sku,
            quantity: each.quantity,
            unit_cost: '1.00',
            quantity_received: each.received,
          })),
        });
        return poTouched(po);
      }
      case 'cancelPurchaseOrder': {
        const po = pick(
          model.purchaseOrders.filter(
            (each) => each.status === 'draft' || purchaseOrderStatus(each) === 'open',
          ),
          step.pick,
        );
        if (!po) return undefined;
        await write('PUT', `/v2/purchase_orders/${po.id}`, { status: 'cancelled' });
        po.status = 'cancelled';
        return poTouched(po);
      }
      case 'createFulfillment': {
        const warehouse = WAREHOUSES[step.warehouse]!;
        const foLines = step.lines.map((line) => ({ sku: skus[line.sku]!, quantity: line.quantity }));
        // The order may ask for more than its fulfillment order holds (the rest fulfilled elsewhere).
        const orderLines = foLines.map((line, i) => ({
          ...line,
          quantity: line.quantity + (i === 0 ? step.orderExtra : 0),
        }));
        const order = await write('POST', '/v2/orders', {
          order_number: `SO-${randomUUID()}`,
          status: 'open',
          lines: orderLines.map((line) => ({ ...line, unit_price: '1.00' })),
        });
        const created = await write('POST', '/v2/fulfillment_orders', {
          order_id: order.id,
          warehouse,
          lines: foLines,
        });
        const fo: Fulfillment = {
          id: created.id,
          orderId: order.id,
          orderQuantity: sum(orderLines.map((line) => line.quantity)),
          warehouse,
          status: 'open',
          everShipped: false,
          lines: foLines.map((line) => ({ ...line, shipped: 0 })),
        };
        model.fulfillments.push(fo);
        return foTouched(fo);
      }
      case 'hold': {
        const fo = pick(
          model.fulfillments.filter((each) => ['open', 'in_progress'].includes(fulfillmentStatus(each))),
          step.pick,
        );
        if (!fo) return undefined;
        const from = fulfillmentStatus(fo);
        await write('PUT', `/v2/fulfillment_orders/${fo.id}`, { status: 'on_hold' });
        fo.status = 'on_hold';
        fo.heldFrom = from;
        return foTouched(fo);
      }
      case 'release': {
        const fo = pick(
          model.fulfillments.filter((each) => each.status === 'on_hold'),
          step.pick,
        );
        if (!fo) return undefined;
        await write('PUT', `/v2/fulfillment_orders/${fo.id}`, { status: fo.heldFrom });
        fo.status = 'open';
        return foTouched(fo);
      }
      case 'cancelFulfillment': {
        const fo = pick(
          model.fulfillments.filter((each) =>
            ['open', 'in_progress', 'on_hold'].includes(fulfillmentStatus(each)),
          ),
          step.pick,
        );
        if (!fo) return undefined;
        await write('PUT', `/v2/fulfillment_orders/${fo.id}`, { status: 'cancelled' });
        fo.status = 'cancelled';
        return foTouched(fo);
      }
      case 'ship': {
        const fo = pick(model.fulfillments.filter(shippable), step.pick);
        if (!fo) return undefined;
        const lineAt = step.line % fo.lines.length;
        const line = fo.lines[lineAt]!;
        const quantity = Math.min(step.quantity, line.quantity - line.shipped);
        if (quantity === 0) return undefined;
        const created = await write('POST', '/v2/shipments', {
          fulfillment_order_id: fo.id,
          packages: [{ tracking_number: `T-${randomUUID()}`, lines: [{ sku: line.sku, quantity }] }],
        });
        line.shipped += quantity;
        fo.everShipped = true;
        model.shipments.push({ id: created.id, fulfillment: fo, line: lineAt, quantity, cancelled: false });
        return {
          ...foTouched(fo),
          statuses: [...foTouched(fo).statuses, [`/v2/shipments/${created.id}`, 'label_created']],
        };
      }
      case 'cancelShipment': {
        const shipment = pick(
          model.shipments.filter((each) => !each.cancelled),
          step.pick,
        );
        if (!shipment) return undefined;
        await write('PUT', `/v2/shipments/${shipment.id}`, { status: 'cancelled' });
        shipment.cancelled = true;
        shipment.fulfillment.lines[shipment.line]!.shipped -= shipment.quantity;
        const touched = foTouched(shipment.fulfillment);
        return { ...touched, statuses: [...touched.statuses, [`/v2/shipments/${shipment.id}`, 'cancelled']] };
      }
    }
  }

  it(`after every response, the inventory and statuses it derives are already visible (${SEQUENCES} sequences)`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(stepArbitrary, { minLength: 1, maxLength: 8 }), async (steps) => {
        // Skus of this sequence alone, so that its inventory starts at zero.
        const prefix = randomUUID().slice(0, 8);
        const skus = SKUS.map((sku) => `${prefix}-${sku}`);
        const model = new Model();
        for (const [at, step] of steps.entries()) {
          const touched = await run(model, step, skus);
          if (!touched) continue;
          for (const [sku, warehouse] of touched.stocks) {
            expect({
              at,
              step: step.kind,
              sku,
              warehouse,
              stock: (await stockOf(acme, sku, warehouse)) ?? NO_STOCK,
            }).toEqual({
              at,
              step: step.kind,
              sku,
              warehouse,
              stock: model.stock(sku, warehouse),
            });
          }
          for (const [path, status] of touched.statuses) {
            const record = (await acme.request<Json>('GET', path)).body.results;
            expect({ at, step: step.kind, path, status: record.status }).toEqual({
              at,
              step: step.kind,
              path,
              status,
            });
          }
        }
      }),
      { numRuns: SEQUENCES, endOnFailure: true },
    );
  }, 1_800_000);
});
