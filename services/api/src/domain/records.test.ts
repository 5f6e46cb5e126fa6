import type { RecordChange, RecordJson } from '@ofp/contracts';
import {
  fulfillmentOrders,
  inventoryAdjustments,
  invoices,
  orders,
  purchaseOrders,
  returns,
  type ModelDefinition,
} from '@ofp/models';
import { decide, type Actor } from '../domain/record-decider.js';
import { stockChanges, stockLimitErrors } from './inventory.js';
import { orderProgressStatus } from './orders.js';
import { thrown } from './thrown.fixture.js';

const AT = '2026-11-21T07:30:00.000Z';
const operator: Actor = { kind: 'client', scopes: ['read', 'write', 'operations'] };
const integrator: Actor = { kind: 'client', scopes: ['read', 'write'] };

const created = (model: ModelDefinition, fields: Record<string, unknown>, by: Actor = operator) =>
  decide(model, { kind: 'create', id: 1, fields, at: AT, by }, { status: 'absent' }).events[0]!.data.record;
const update = (
  model: ModelDefinition,
  record: RecordJson,
  fields: Record<string, unknown>,
  by: Actor = operator,
) => decide(model, { kind: 'update', fields, at: AT, by }, { status: 'live', record }).events[0];

describe('invoices', () => {
  const invoice = created(invoices, {
    invoice_number: 'I-1',
    amount_paid: '0.00',
    lines: [
      { quantity: 3, unit_price: '10.00' },
      { quantity: 1, unit_price: '0.50' },
    ],
  });

  it('derives line amounts, the total and the amount due', () => {
    expect(invoice).toMatchObject({
      status: 'open',
      total: '30.50',
      amount_due: '30.50',
      lines: [{ amount: '30.00' }, { amount: '0.50' }],
    });
  });

  it('follows payments to partially_paid and paid, announcing invoice.paid', () => {
    const part = update(invoices, invoice, { amount_paid: '10.50' })!;
    expect(part).toMatchObject({
      type: 'invoice.updated',
      data: { record: { status: 'partially_paid', amount_due: '20.00' } },
    });
    expect(update(invoices, part.data.record, { amount_paid: '30.50' })).toMatchObject({
      type: 'invoice.paid',
      data: { record: { status: 'paid', amount_due: '0.00' }, previous: { status: 'partially_paid' } },
    });
  });

  it.each([
    ['more than the total', '30.51', 'must be at most the total 30.50'],
    ['less than was paid', '0.00', 'cannot decrease: 5.00 is paid'],
  ])('refuses paying %s', (_case, amount, message) => {
    const paid = update(invoices, invoice, { amount_paid: '5.00' })!.data.record;
    expect(thrown(() => update(invoices, paid, { amount_paid: amount }))).toMatchObject({
      kind: 'Unprocessable',
      errors: { amount_paid: [message] },
    });
  });

  it('refuses paying a void invoice with a 409', () => {
    const voided = update(invoices, invoice, { status: 'void' })!.data.record;
    expect(thrown(() => update(invoices, voided, { amount_paid: '1.00' }))).toMatchObject({
      kind: 'Conflict',
      errors: { status: ['cannot pay a void invoice'] },
    });
  });
});

describe('purchase orders', () => {
  const line = (quantity_received?: number) => ({
    sku: 'A',
    quantity: 10,
    unit_cost: '1.50',
    ...(quantity_received === undefined ? {} : { quantity_received }),
  });
  const draft = created(
    purchaseOrders,
    { po_number: 'PO-1', lines: [line(), { sku: 'B', quantity: 2 }] },
    integrator,
  );
  const open = update(purchaseOrders, draft, { status: 'open' }, integrator)!.data.record;

  it('starts unreceived, with its total', () => {
    expect(draft).toMatchObject({
      status: 'draft',
      total: '15.00',
      lines: [{ quantity_received: 0 }, { quantity_received: 0 }],
    });
  });

  it('receives by growing quantity_received, a line left without it keeping its value', () => {
    const part = update(purchaseOrders, open, { lines: [line(4), { sku: 'B', quantity: 2 }] })!.data.record;
    expect(part).toMatchObject({
      status: 'partially_received',
      lines: [{ quantity_received: 4 }, { quantity_received: 0 }],
    });
    const rest = update(purchaseOrders, part, {
      lines: [line(), { sku: 'B', quantity: 2, quantity_received: 2 }],
    })!;
    expect(rest.data.record).toMatchObject({ lines: [{ quantity_received: 4 }, { quantity_received: 2 }] });
    expect(
      update(purchaseOrders, rest.data.record, { lines: [line(10), { sku: 'B', quantity: 2 }] }),
    ).toMatchObject({
      type: 'purchase_order.received',
      data: { record: { status: 'received' } },
    });
  });

  it.each([
    [11, 'must be at most the quantity 10'],
    [3, 'cannot decrease: 4 received'],
  ])('refuses receiving %s on the line path', (received, message) => {
    const part = update(purchaseOrders, open, { lines: [line(4)] })!.data.record;
    expect(thrown(() => update(purchaseOrders, part, { lines: [line(received)] }))).toMatchObject({
      errors: { 'lines[0].quantity_received': [message] },
    });
  });

  it('refuses receiving a draft with a 409', () => {
    expect(thrown(() => update(purchaseOrders, draft, { lines: [line(1)] }))).toMatchObject({
      kind: 'Conflict',
      errors: { status: ['cannot receive while draft'] },
    });
  });

  it('needs the operations scope to receive, and write to edit', () => {
    expect(thrown(() => update(purchaseOrders, open, { lines: [line(1)] }, integrator))).toMatchObject({
      kind: 'Forbidden',
    });
    const receiver: Actor = { kind: 'client', scopes: ['operations'] };
    expect(
      update(purchaseOrders, open, { lines: [line(1), { sku: 'B', quantity: 2 }] }, receiver),
    ).toBeDefined();
    expect(thrown(() => update(purchaseOrders, open, { vendor_name: 'X' }, receiver))).toMatchObject({
      kind: 'Forbidden',
    });
  });
});

describe('returns', () => {
  const restock = (quantity_received?: number) => ({
    sku: 'A',
    quantity: 3,
    disposition: 'restock',
    ...(quantity_received === undefined ? {} : { quantity_received }),
  });
  const dispose = { sku: 'B', quantity: 1, disposition: 'dispose' };
  const requested = created(
    returns,
    { rma_number: 'RMA-1', warehouse: 'W', lines: [restock(), dispose] },
    integrator,
  );
  const authorized = update(returns, requested, { status: 'authorized' })!.data.record;
  const LATER = '2026-11-22T08:00:00.000Z';

  it('starts requested and unreceived, a line without disposition restocked', () => {
    expect(requested).toMatchObject({ status: 'requested', received_at: null });
    expect(requested.lines).toEqual([
      { ...restock(), quantity_received: 0 },
      { ...dispose, quantity_received: 0 },
    ]);
    expect(created(returns, { rma_number: 'RMA-2', lines: [{ sku: 'A', quantity: 1 }] })).toMatchObject({
      lines: [{ disposition: 'restock' }],
    });
  });

  it('receives by growing quantity_received, keeping a disposition a PUT leaves out', () => {
    const part = update(returns, authorized, { lines: [restock(2), { sku: 'B', quantity: 1 }] })!;
    expect(part).toMatchObject({
      type: 'return.updated',
      data: { record: { status: 'partially_received', received_at: null } },
    });
    expect(part.data.record.lines).toMatchObject([{ quantity_received: 2 }, { disposition: 'dispose' }]);
    const full = decide(
      returns,
      {
        kind: 'update',
        fields: { lines: [restock(3), { ...dispose, quantity_received: 1 }] },
        at: LATER,
        by: operator,
      },
      { status: 'live', record: part.data.record },
    ).events[0]!;
    expect(full).toMatchObject({
      type: 'return.received',
      data: { record: { status: 'received', received_at: LATER } },
    });
    const refunded = update(returns, full.data.record, { status: 'refunded' })!.data.record;
    expect(update(returns, refunded, { status: 'closed' }, integrator)!.data.record.status).toBe('closed');
  });

  it('keeps a received_at the operator gives', () => {
    const full = update(returns, authorized, {
      received_at: '2026-11-20T10:00:00.000Z',
      lines: [restock(3), { ...dispose, quantity_received: 1 }],
    })!;
    expect(full.data.record).toMatchObject({ status: 'received', received_at: '2026-11-20T10:00:00.000Z' });
  });

  it.each([
    [4, 'lines[0].quantity_received', 'must be at most the quantity 3'],
    [1, 'lines[0].quantity_received', 'cannot decrease: 2 received'],
  ])('refuses receiving %s on the line path', (received, path, message) => {
    const part = update(returns, authorized, { lines: [restock(2), dispose] })!.data.record;
    expect(thrown(() => update(returns, part, { lines: [restock(received), dispose] }))).toMatchObject({
      kind: 'Unprocessable',
      errors: { [path]: [message] },
    });
  });

  it('refuses changing the disposition of a received line', () => {
    const part = update(returns, authorized, { lines: [restock(2), dispose] })!.data.record;
    expect(
      thrown(() => update(returns, part, { lines: [{ ...restock(2), disposition: 'dispose' }, dispose] })),
    ).toMatchObject({
      kind: 'Unprocessable',
      errors: { 'lines[0].disposition': ['cannot change once received'] },
    });
  });

  it('refuses receiving a return not yet authorized with a 409', () => {
    expect(thrown(() => update(returns, requested, { lines: [restock(1), dispose] }))).toMatchObject({
      kind: 'Conflict',
      errors: { status: ['cannot receive while requested'] },
    });
  });

  it('needs operations to authorize, reject, receive and refund; write to ask, edit, cancel and close', () => {
    const receiver: Actor = { kind: 'client', scopes: ['operations'] };
    expect(thrown(() => update(returns, requested, { status: 'authorized' }, integrator))).toMatchObject({
      kind: 'Forbidden',
    });
    expect(thrown(() => update(returns, requested, { status: 'rejected' }, integrator))).toMatchObject({
      kind: 'Forbidden',
    });
    expect(
      thrown(() => update(returns, authorized, { lines: [restock(1), dispose] }, integrator)),
    ).toMatchObject({
      kind: 'Forbidden',
    });
    expect(update(returns, requested, { status: 'authorized' }, receiver)).toBeDefined();
    expect(update(returns, authorized, { lines: [restock(1), dispose] }, receiver)).toBeDefined();
    expect(update(returns, requested, { status: 'cancelled' }, integrator)).toBeDefined();
    expect(thrown(() => update(returns, requested, { status: 'cancelled' }, receiver))).toMatchObject({
      kind: 'Forbidden',
    });
    expect(thrown(() => update(returns, authorized, { reason: 'wrong size' }, receiver))).toMatchObject({
      kind: 'Forbidden',
    });
    expect(thrown(() => created(returns, { rma_number: 'RMA-3', lines: [] }, receiver))).toMatchObject({
      kind: 'Forbidden',
    });
  });
});

describe('event types of API.md §8', () => {
  it.each([
    [orders, 'open', 'cancelled', 'order.cancelled'],
    [orders, 'pending', 'open', 'order.updated'],
    [fulfillmentOrders, 'in_progress', 'cancelled', 'fulfillment_order.cancelled'],
    [fulfillmentOrders, 'open', 'in_progress', 'fulfillment_order.updated'],
  ] as const)('%s moved from %s to %s is %s', (model, from, to, type) => {
    const record = { id: 1, version: 1, status: from, lines: [], created_at: AT, updated_at: AT };
    expect(update(model, record, { status: to })?.type).toBe(type);
  });
});

describe('orderProgressStatus', () => {
  const order = (status: string) => ({ id: 1, version: 1, status, lines: [{ quantity: 4 }] });
  it.each([
    ['open', 4, 0, undefined],
    ['open', 4, 1, 'partially_fulfilled'],
    ['partially_fulfilled', 4, 4, 'fulfilled'],
    ['pending', 0, 4, 'fulfilled'],
    ['open', 6, 4, 'partially_fulfilled'],
    ['fulfilled', 4, 0, 'open'],
    ['on_hold', 4, 4, undefined],
    ['cancelled', 4, 4, undefined],
  ])(
    'an order %s with %s on its fulfillment orders and %s shipped → %s',
    (status, ordered, shipped, next) => {
      expect(orderProgressStatus(order(status), ordered, shipped)).toBe(next);
    },
  );
});

describe('stockChanges', () => {
  const change = (
    record: Record<string, unknown>,
    previous: Record<string, unknown> = {},
    deleted = false,
  ): RecordChange => ({
    record: { id: 1, version: Object.keys(previous).length > 0 || deleted ? 2 : 1, ...record },
    previous,
    deleted,
  });
  const at = (changes: ReturnType<typeof stockChanges>) => Object.fromEntries(changes);

  it('adds an adjustment to on_hand', () => {
    expect(
      at(stockChanges(inventoryAdjustments.name, change({ sku: 'A', warehouse: 'W', quantity_delta: -3 }))),
    ).toEqual({
      '["A","W"]': { sku: 'A', warehouse: 'W', on_hand: -3, committed: 0, inbound: 0 },
    });
  });

  it('commits a new fulfillment order, and moves what ships from committed out of on_hand', () => {
    const lines = (shipped: number) => [{ sku: 'A', quantity: 5, quantity_shipped: shipped }];
    const record = { warehouse: 'W', status: 'open', lines: lines(0) };
    expect(at(stockChanges('fulfillment_orders', change(record)))).toEqual({
      '["A","W"]': { sku: 'A', warehouse: 'W', on_hand: 0, committed: 5, inbound: 0 },
    });
    const shipped = change(
      { ...record, status: 'partially_shipped', lines: lines(2) },
      { status: 'open', lines: lines(0) },
    );
    expect(at(stockChanges('fulfillment_orders', shipped))).toEqual({
      '["A","W"]': { sku: 'A', warehouse: 'W', on_hand: -2, committed: -2, inbound: 0 },
    });
    const cancelled = change(
      { ...record, status: 'cancelled', lines: lines(2) },
      { status: 'partially_shipped' },
    );
    expect(at(stockChanges('fulfillment_orders', cancelled))).toEqual({
      '["A","W"]': { sku: 'A', warehouse: 'W', on_hand: 0, committed: -3, inbound: 0 },
    });
  });

  it('expects an open purchase order’s quantities and receives them into on_hand', () => {
    const lines = (received: number) => [{ sku: 'A', quantity: 5, quantity_received: received }];
    const opened = change({ warehouse: 'W', status: 'open', lines: lines(0) }, { status: 'draft' });
    expect(at(stockChanges('purchase_orders', opened))).toEqual({
      '["A","W"]': { sku: 'A', warehouse: 'W', on_hand: 0, committed: 0, inbound: 5 },
    });
    const received = change(
      { warehouse: 'W', status: 'partially_received', lines: lines(3) },
      { status: 'open', lines: lines(0) },
    );
    expect(at(stockChanges('purchase_orders', received))).toEqual({
      '["A","W"]': { sku: 'A', warehouse: 'W', on_hand: 3, committed: 0, inbound: -3 },
    });
  });

  it('puts what a return receives on hand on its restock lines only', () => {
    const lines = (restocked: number, disposed: number) => [
      { sku: 'A', quantity: 5, quantity_received: restocked, disposition: 'restock' },
      { sku: 'B', quantity: 5, quantity_received: disposed, disposition: 'dispose' },
    ];
    const received = change(
      { warehouse: 'W', status: 'partially_received', lines: lines(3, 2) },
      { status: 'authorized', lines: lines(1, 0) },
    );
    expect(at(stockChanges('returns', received))).toEqual({
      '["A","W"]': { sku: 'A', warehouse: 'W', on_hand: 2, committed: 0, inbound: 0 },
    });
    expect(
      stockChanges('returns', change({ warehouse: 'W', status: 'requested', lines: lines(0, 0) })).size,
    ).toBe(0);
  });

  it('leaves out what does not move stock', () => {
    expect(
      stockChanges('purchase_orders', change({ status: 'draft', lines: [{ sku: 'A', quantity: 5 }] })).size,
    ).toBe(0);
  });
});

describe('derived totals beyond their columns (API.md §1)', () => {
  const MAX_LINE = 2_147_483_647;

  it('refuses an order whose total would have more than 15 digits before the point, naming total', () => {
    const lines = [{ sku: 'A', quantity: MAX_LINE, unit_price: '999999999999999.9999' }];
    expect(thrown(() => created(orders, { order_number: 'SO-1', lines }))).toMatchObject({
      kind: 'Unprocessable',
      errors: { total: ['would have more digits than it holds (15 before the point, 4 after it)'] },
    });
  });

  it('keeps every digit of a total at the bound, and the 4 digits after the point', () => {
    const record = created(orders, {
      order_number: 'SO-2',
      lines: [
        { sku: 'A', quantity: 3, unit_price: '0.3333' },
        { sku: 'B', quantity: 1, unit_price: '999999999999998.0000' },
      ],
    });
    expect(record.total).toBe('999999999999998.9999');
  });

  it('names the line amount, the total and the amount due of an invoice that would overflow', () => {
    const lines = [
      { quantity: 1, unit_price: '1.00' },
      { quantity: MAX_LINE, unit_price: '999999999999999.0000' },
    ];
    expect(
      thrown(() => created(invoices, { invoice_number: 'I-9', amount_paid: '0.00', lines })),
    ).toMatchObject({
      kind: 'Unprocessable',
      errors: {
        'lines[1].amount': [expect.stringContaining('would have more digits')],
        total: [expect.any(String)],
        amount_due: [expect.any(String)],
      },
    });
  });

  it('refuses a purchase order whose total would overflow', () => {
    const lines = Array.from({ length: 2 }, () => ({
      sku: 'A',
      quantity: MAX_LINE,
      unit_cost: '999999999999.0000',
    }));
    expect(thrown(() => created(purchaseOrders, { po_number: 'PO-9', lines }))).toMatchObject({
      errors: { total: [expect.any(String)] },
    });
  });
});

describe('stockLimitErrors', () => {
  const key = { sku: 'A', warehouse: 'W' };
  const stock = (on_hand: number, committed = 0, inbound = 0) => ({ on_hand, committed, inbound });

  it('names each total a change would take beyond 32 bits', () => {
    expect(
      stockLimitErrors([{ ...key, ...stock(1, 2, 0) }], () => stock(2_147_483_647, 2_147_483_646)),
    ).toEqual({
      on_hand: [
        'would be 2147483648 for sku "A" in warehouse "W", beyond what it holds (-2147483648 to 2147483647)',
      ],
      committed: [expect.stringContaining('would be 2147483648')],
    });
    expect(stockLimitErrors([{ ...key, ...stock(-1) }], () => stock(-2_147_483_648))).toHaveProperty(
      'on_hand',
    );
  });

  it('lets a total within 32 bits, or one already beyond move back', () => {
    expect(stockLimitErrors([{ ...key, ...stock(2_147_483_646) }], () => stock(1))).toEqual({});
    expect(stockLimitErrors([{ ...key, ...stock(-5) }], () => stock(2_147_483_700))).toEqual({});
  });
});
