import type { RecordJson } from '@ofp/contracts';
import { MODELS, type ModelDefinition } from '@ofp/models';
import { decide, type Actor, type RecordState } from './record-decider.js';
import { thrown } from '../domain/thrown.fixture.js';

const AT = '2026-11-21T07:30:00.000Z';
const operator: Actor = { kind: 'client', scopes: ['read', 'write', 'operations'] };

/**
 * The moves a client may make (API.md §6), written out here rather than read from the registry, so
 * that a wrong registry entry fails. `back` is the move out of a hold to the status before it.
 */
const CLIENT_MOVES: Record<string, { moves: string[]; hold?: { state: string; from: string[] } }> = {
  orders: {
    moves: ['pending>open', 'pending>cancelled', 'open>cancelled', 'on_hold>cancelled'],
    hold: { state: 'on_hold', from: ['pending', 'open'] },
  },
  fulfillment_orders: {
    moves: [
      'open>in_progress',
      'open>cancelled',
      'in_progress>cancelled',
      'on_hold>cancelled',
      'shipped>closed',
    ],
    hold: { state: 'on_hold', from: ['open', 'in_progress'] },
  },
  shipments: {
    moves: [
      'label_created>in_transit',
      'in_transit>out_for_delivery',
      'out_for_delivery>delivered',
      ...['label_created', 'in_transit', 'out_for_delivery'].flatMap((from) => [
        `${from}>exception`,
        `${from}>cancelled`,
      ]),
      'exception>cancelled',
    ],
  },
  purchase_orders: { moves: ['draft>open', 'draft>cancelled', 'open>cancelled', 'received>closed'] },
  invoices: { moves: ['open>void'] },
  returns: {
    moves: [
      'requested>authorized',
      'requested>rejected',
      'requested>cancelled',
      'authorized>rejected',
      'authorized>cancelled',
      'received>refunded',
      'refunded>closed',
    ],
  },
};

function statusesOf(model: ModelDefinition): string[] {
  const column = model.fields[model.stateMachine!.column]!;
  if (column.kind !== 'column' || column.type !== 'string' || !column.values) throw new Error('no statuses');
  return [...column.values];
}

/** A record of the model in `status`, with nothing that other rules would object to. */
function recordIn(status: string): RecordJson {
  return {
    id: 1,
    status,
    fulfillment_order_id: 5,
    lines: [],
    packages: [],
    amount_paid: '0.00',
    version: 3,
    created_at: AT,
    updated_at: AT,
  };
}

const machines = Object.values(MODELS).filter((model) => model.stateMachine);

describe('the state machines of API.md §6', () => {
  it('are all covered here', () => {
    expect(machines.map((model) => model.name).sort()).toEqual(Object.keys(CLIENT_MOVES).sort());
  });

  describe.each(machines.map((model) => [model.name, model] as const))('%s', (_name, model) => {
    const { moves, hold } = CLIENT_MOVES[model.name]!;
    const derived = model.stateMachine!.derived;
    const statuses = statusesOf(model);
    const pairs = statuses.flatMap((from) =>
      statuses.filter((to) => to !== from).map((to) => [from, to] as const),
    );
    // On hold, the record remembers the status it came from (the first one that may be held).
    const heldFrom = (from: string) => (hold && from === hold.state ? hold.from[0] : undefined);
    const state = (from: string): RecordState => {
      const before = heldFrom(from);
      return { status: 'live', record: recordIn(from), ...(before ? { heldFrom: before } : {}) };
    };
    const move = (from: string, to: string) =>
      decide(model, { kind: 'update', fields: { status: to }, at: AT, by: operator }, state(from));
    const legal = (from: string, to: string) =>
      moves.includes(`${from}>${to}`) ||
      (hold !== undefined && to === hold.state && hold.from.includes(from)) ||
      to === heldFrom(from);

    const refused = pairs.filter(([from, to]) => !derived.includes(to) && !legal(from, to));
    it.each(refused)('refuses %s → %s with a 409 naming both states', (from, to) => {
      expect(thrown(() => move(from, to))).toMatchObject({
        kind: 'Conflict',
        errors: { status: [`cannot move from ${from} to ${to}`] },
      });
    });

    const setsDerived = pairs.filter(([, to]) => derived.includes(to));
    if (setsDerived.length > 0)
      it.each(setsDerived)('refuses a client setting %s → %s (derived) with a 422', (from, to) => {
        expect(thrown(() => move(from, to))).toMatchObject({
          kind: 'Unprocessable',
          errors: { status: [`cannot be set to ${to}: the system sets it`] },
        });
      });

    const allowed = pairs.filter(([from, to]) => !derived.includes(to) && legal(from, to));
    it.each(allowed)('moves %s → %s', (from, to) => {
      expect(move(from, to).events[0]?.data.record.status).toBe(to);
    });
  });
});

describe('decide', () => {
  const people = MODELS.people;
  const person = decide(
    people,
    { kind: 'create', id: 1, fields: { last_name: 'Lovelace' }, at: AT, by: operator },
    { status: 'absent' },
  ).events[0]!.data.record;

  it('decides no event for an update that changes nothing', () => {
    expect(
      decide(
        people,
        { kind: 'update', fields: { last_name: 'Lovelace' }, at: AT, by: operator },
        { status: 'live', record: person },
      ).events,
    ).toEqual([]);
  });

  describe('compares nested values whatever their key order (a stored record comes back from jsonb)', () => {
    const orders = MODELS.orders;
    const created = decide(
      orders,
      {
        kind: 'create',
        id: 15,
        fields: {
          order_number: 'SO-15',
          notes: null,
          ship_to: { name: 'Ada', address1: '1 Main St', city: 'London', country: 'GB' },
          lines: [{ sku: 'A', quantity: 2, unit_price: '1.25' }],
        },
        at: AT,
        by: operator,
      },
      { status: 'absent' },
    ).events[0]!.data.record;
    // What jsonb gives back: keys by length, then bytewise, at every depth.
    const reordered = (value: unknown): unknown =>
      Array.isArray(value)
        ? value.map(reordered)
        : value !== null && typeof value === 'object'
          ? Object.fromEntries(
              Object.entries(value)
                .sort(([a], [b]) => a.length - b.length || (a < b ? -1 : 1))
                .map(([key, each]) => [key, reordered(each)]),
            )
          : value;
    const stored = { status: 'live' as const, record: reordered(created) as RecordJson };
    const update = (fields: Record<string, unknown>) =>
      decide(orders, { kind: 'update', fields, at: AT, by: operator }, stored).events;

    it('decides no event when every given value equals the stored one', () => {
      expect(update({ notes: null })).toEqual([]);
      expect(
        update({
          ship_to: { country: 'GB', city: 'London', address1: '1 Main St', name: 'Ada' },
          lines: [{ unit_price: '1.25', quantity: 2, sku: 'A' }],
        }),
      ).toEqual([]);
    });

    it('lists exactly the changed fields in previous, a changed list in full', () => {
      expect(update({ notes: 'ring twice' })[0]?.data.previous).toEqual({ notes: null });
      expect(update({ status: 'cancelled' })[0]?.data.previous).toEqual({ status: 'pending' });
      const relined = update({ lines: [{ sku: 'A', quantity: 3, unit_price: '1.25' }] })[0]?.data;
      expect(Object.keys(relined?.previous ?? {}).sort()).toEqual(['lines', 'total']);
      expect(relined?.previous.lines).toEqual(stored.record.lines);
    });
  });

  it('names the changed fields’ old values, derived ones included', () => {
    const orders = MODELS.orders;
    const order = { ...recordIn('open'), order_number: 'SO-1', total: '0.00' };
    const [event] = decide(
      orders,
      {
        kind: 'update',
        fields: { lines: [{ sku: 'A', quantity: 2, unit_price: '1.25' }] },
        at: AT,
        by: operator,
      },
      { status: 'live', record: order },
    ).events;
    expect(event?.data.previous).toEqual({ lines: [], total: '0.00' });
    expect(event?.data.record).toMatchObject({ total: '2.50', version: 4 });
  });

  it('lets the system set a derived status a client may not', () => {
    const orders = MODELS.orders;
    const [event] = decide(
      orders,
      { kind: 'update', fields: { status: 'fulfilled' }, at: AT, by: { kind: 'system' } },
      { status: 'live', record: recordIn('open') },
    ).events;
    expect(event?.data.record.status).toBe('fulfilled');
  });

  it('refuses a change the token has no scope for, with the challenge of RFC 6750', () => {
    expect(
      thrown(() =>
        decide(
          MODELS.invoices,
          {
            kind: 'create',
            id: 2,
            fields: { invoice_number: 'I-1' },
            at: AT,
            by: { kind: 'client', scopes: ['write'] },
          },
          { status: 'absent' },
        ),
      ),
    ).toMatchObject({ kind: 'Forbidden', requiredScope: 'operations' });
  });
});
