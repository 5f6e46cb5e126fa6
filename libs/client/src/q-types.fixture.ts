// Uses of the client that must compile, and misuses that must not, each marked `@ts-expect-error`:
// tsc checks this file with the rest (an unneeded directive is an error), and q-types.test.ts checks
// that each marked line fails on its own. Never run.
import { expectTypeOf } from 'expect-type';
import type { OfpClient, QueryOf, RecordOf, WebhookEvent } from './index.js';

export async function uses(ofp: OfpClient): Promise<void> {
  // A column filter, a dotted filter and the "same related record" pair (API.md §4), an order, a page.
  await ofp.search('people', {
    filters: [
      { operand: 'last_name', operator: '=', value: 'Lovelace' },
      { operand: 'phone_numbers.phone_number_type.name', operator: '=', value: 'Work' },
      { operand: 'phone_numbers.number', operator: 'in', value: ['5551234', '5555678'] },
      { operand: 'email', operator: '!=', value: null },
    ],
    order: [{ column: 'created_at', direction: 'desc' }],
    limit: 10,
  });
  await ofp.search('orders', {
    filters: [
      { operand: 'total', operator: '>=', value: 100 },
      { operand: 'lines.sku', operator: '=', value: 'SKU-1' },
      { operand: 'requested_ship_date', operator: '<', value: '2026-12-01' },
    ],
  });
  await ofp.search('inventory', { filters: [{ operand: 'item.active', operator: '=', value: true }] });
  const person = await ofp.get('people', 1);
  expectTypeOf(person.last_name).toEqualTypeOf<string>();
  expectTypeOf<RecordOf<'orders'>['status']>().toEqualTypeOf<
    'pending' | 'open' | 'on_hold' | 'partially_fulfilled' | 'fulfilled' | 'cancelled' | null
  >();
  const query: QueryOf<'people'> = { filters: [{ operand: 'company', operator: '=', value: 'Acme' }] };
  for await (const found of ofp.list('people', query)) expectTypeOf(found.id).toEqualTypeOf<number>();
  await ofp.create('people', { last_name: 'Lovelace' });
  await ofp.update('orders', 1, { status: 'open' }, { ifMatch: 2 });
  for await (const event of ofp.events({ types: ['order.cancelled'] })) {
    if (event.type === 'order.cancelled') expectTypeOf(event.data.order_number).toEqualTypeOf<string>();
    expectTypeOf(event).toEqualTypeOf<WebhookEvent>();
  }
}

export async function misuses(ofp: OfpClient): Promise<void> {
  // @ts-expect-error a column of people is no operand of orders
  await ofp.search('orders', { filters: [{ operand: 'last_name', operator: '=', value: 'Lovelace' }] });
  // @ts-expect-error filters is a list
  await ofp.search('people', { filters: 7 });
  // @ts-expect-error no such key in q
  await ofp.search('people', { limt: 5 });
  // @ts-expect-error a string column takes a string
  await ofp.search('people', { filters: [{ operand: 'last_name', operator: '=', value: 7 }] });
  // @ts-expect-error a decimal column takes a number
  await ofp.search('orders', { filters: [{ operand: 'total', operator: '>', value: '10.00' }] });
  // @ts-expect-error null goes with = and != only
  await ofp.search('people', { filters: [{ operand: 'email', operator: '>', value: null }] });
  // @ts-expect-error in takes a list
  await ofp.search('people', { filters: [{ operand: 'last_name', operator: 'in', value: 'Lovelace' }] });
  // @ts-expect-error no such operator
  await ofp.search('people', { filters: [{ operand: 'last_name', operator: 'like', value: 'Love%' }] });
  // @ts-expect-error a dotted path must lead to a column
  await ofp.search('people', { filters: [{ operand: 'phone_numbers.nope', operator: '=', value: 'x' }] });
  // @ts-expect-error a relation is no operand
  await ofp.search('people', { filters: [{ operand: 'phone_numbers', operator: '=', value: 'x' }] });
  // @ts-expect-error the order takes the model's own columns, not dotted paths
  await ofp.search('people', { order: [{ column: 'phone_numbers.number' }] });
  // @ts-expect-error no such model
  await ofp.search('persons', {});
  // @ts-expect-error inventory is read-only
  await ofp.create('inventory', { sku: 'X' });
  // @ts-expect-error invoices are never deleted
  await ofp.delete('invoices', 1);
  // @ts-expect-error no such event type
  ofp.events({ types: ['people.created'] });
}
