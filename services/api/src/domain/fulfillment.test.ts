import type { RecordJson } from '@ofp/contracts';
import { fulfillmentOrders, shipments } from '@ofp/models';
import { decide, type Actor, type RecordState } from '../domain/record-decider.js';
import { thrown } from './thrown.fixture.js';

const AT = '2026-11-21T07:30:00.000Z';
const operator: Actor = { kind: 'client', scopes: ['read', 'write', 'operations'] };
const integrator: Actor = { kind: 'client', scopes: ['read', 'write'] };

function live(record: Record<string, unknown>, heldFrom?: string): RecordState {
  return { status: 'live', record: record as RecordJson, ...(heldFrom ? { heldFrom } : {}) };
}

function fulfillmentOrder(status: string, lines: [string, number, number][]): RecordJson {
  const created = decide(
    fulfillmentOrders,
    {
      kind: 'create',
      id: 5,
      fields: { lines: lines.map(([sku, quantity]) => ({ sku, quantity })) },
      at: AT,
      by: integrator,
    },
    { status: 'absent' },
  ).events[0]!.data.record;
  return {
    ...created,
    status,
    lines: lines.map(([sku, quantity, quantity_shipped]) => ({ sku, quantity, quantity_shipped })),
  };
}

const related = (order: RecordJson) => ({ model: fulfillmentOrders, id: order.id, state: live(order) });

function shipping(lines: [string, number][][]) {
  return {
    fulfillment_order_id: 5,
    packages: lines.map((packageLines, i) => ({
      tracking_number: `1Z${i}`,
      tracking_url: null,
      weight: null,
      lines: packageLines.map(([sku, quantity]) => ({ sku, quantity })),
    })),
  };
}

function ship(order: RecordJson, lines: [string, number][][], by: Actor = operator) {
  return decide(
    shipments,
    { kind: 'create', id: 9, fields: shipping(lines), at: AT, by },
    { status: 'absent' },
    related(order),
  );
}

describe('creating a shipment', () => {
  it('adds what it ships to its fulfillment order, in the same decision', () => {
    const decision = ship(
      fulfillmentOrder('open', [
        ['A', 5, 0],
        ['B', 2, 0],
      ]),
      [
        [['A', 2]],
        [
          ['A', 1],
          ['B', 2],
        ],
      ],
    );
    expect(decision.events.map((e) => e.type)).toEqual(['shipment.created']);
    expect(decision.related?.events[0]).toMatchObject({
      type: 'fulfillment_order.updated',
      data: {
        record: {
          status: 'partially_shipped',
          version: 2,
          lines: [
            { sku: 'A', quantity: 5, quantity_shipped: 3 },
            { sku: 'B', quantity: 2, quantity_shipped: 2 },
          ],
        },
        previous: { status: 'open' },
      },
    });
  });

  it('ships the fulfillment order when nothing is left open', () => {
    const decision = ship(fulfillmentOrder('partially_shipped', [['A', 5, 3]]), [[['A', 2]]]);
    expect(decision.related?.events[0]).toMatchObject({
      type: 'fulfillment_order.shipped',
      data: { record: { status: 'shipped', lines: [{ quantity_shipped: 5 }] } },
    });
  });

  it('refuses to ship more than is still open, naming the package line', () => {
    expect(
      thrown(() => ship(fulfillmentOrder('open', [['A', 5, 0]]), [[['A', 4]], [['A', 2]]])),
    ).toMatchObject({
      kind: 'Unprocessable',
      errors: {
        'packages[1].lines[0].quantity': ['ships 2 of A, but only 1 is still open on fulfillment order 5'],
      },
    });
  });

  it('refuses a sku the fulfillment order does not hold', () => {
    expect(thrown(() => ship(fulfillmentOrder('open', [['A', 5, 0]]), [[['Z', 1]]]))).toMatchObject({
      errors: { 'packages[0].lines[0].sku': ['is not on fulfillment order 5'] },
    });
  });

  it.each(['on_hold', 'shipped', 'closed', 'cancelled'])(
    'refuses a fulfillment order that is %s with a 409',
    (status) => {
      expect(
        thrown(() => ship(fulfillmentOrder(status, [['A', 5, status === 'shipped' ? 5 : 0]]), [[['A', 1]]])),
      ).toMatchObject({ kind: 'Conflict' });
    },
  );

  it('needs the operations scope', () => {
    expect(
      thrown(() => ship(fulfillmentOrder('open', [['A', 5, 0]]), [[['A', 1]]], integrator)),
    ).toMatchObject({ kind: 'Forbidden' });
  });
});

describe('updating a shipment', () => {
  const order = fulfillmentOrder('open', [['A', 5, 0]]);
  const shipped = ship(order, [[['A', 5]]]);
  const shipment = shipped.events[0]!.data.record;
  const orderAfter = shipped.related!.events[0]!.data.record;
  const update = (fields: Record<string, unknown>) =>
    decide(shipments, { kind: 'update', fields, at: AT, by: operator }, live(shipment), related(orderAfter));

  it('gives the quantities back to the fulfillment order when cancelled', () => {
    const decision = update({ status: 'cancelled' });
    expect(decision.events[0]).toMatchObject({
      type: 'shipment.updated',
      data: { record: { status: 'cancelled' } },
    });
    expect(decision.related?.events[0]?.data.record).toMatchObject({
      status: 'in_progress',
      lines: [{ quantity_shipped: 0 }],
    });
  });

  it('announces tracking changes and delivery', () => {
    expect(update({ status: 'in_transit' }).events[0]?.type).toBe('shipment.tracking_updated');
    const delivering = { ...shipment, status: 'out_for_delivery' } as RecordJson;
    expect(
      decide(
        shipments,
        { kind: 'update', fields: { status: 'delivered' }, at: AT, by: operator },
        live(delivering),
        related(orderAfter),
      ).events[0]?.type,
    ).toBe('shipment.delivered');
  });

  it('refuses to change what it ships or its fulfillment order', () => {
    expect(thrown(() => update(shipping([[['A', 4]]])))).toMatchObject({
      errors: { packages: [expect.any(String)] },
    });
    expect(thrown(() => update({ fulfillment_order_id: 6 }))).toMatchObject({
      errors: { fulfillment_order_id: [expect.any(String)] },
    });
  });
});
