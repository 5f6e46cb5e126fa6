import { inRegistryOrder } from './key-order.js';
import { orders, people } from './registry.js';

/** The same object with its keys in reverse order, at every depth (lists keep their order). */
function reversed(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reversed);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.entries(value)
      .reverse()
      .map(([key, nested]) => [key, reversed(nested)]),
  );
}

describe('inRegistryOrder', () => {
  const person = {
    id: 7,
    first_name: 'Ada',
    last_name: 'Lovelace',
    phone_numbers: [{ number: '555', phone_number_type: { id: 1, name: 'Work' } }],
    external_id: null,
    created_at: '2026-11-21T07:30:00.000Z',
    updated_at: '2026-11-21T07:30:00.000Z',
    version: 2,
  };

  it('puts keys in registry order at every depth, whatever order they came in', () => {
    const ordered = inRegistryOrder(people.fields, reversed(person) as Record<string, unknown>);
    expect(JSON.stringify(ordered)).toBe(JSON.stringify(inRegistryOrder(people.fields, person)));
    const declared = Object.keys(people.fields).filter((name) => name in person);
    expect(Object.keys(ordered)).toEqual(declared);
    const phone = (ordered.phone_numbers as Record<string, unknown>[])[0]!;
    expect(Object.keys(phone)).toEqual(['number', 'phone_number_type']);
    expect(Object.keys(phone.phone_number_type as object)).toEqual(['id', 'name']);
  });

  it('leaves out keys the registry does not declare and keeps absent fields absent', () => {
    expect(inRegistryOrder(people.fields, { version: 3, secret: 'x', first_name: 'Ada' })).toEqual({
      first_name: 'Ada',
      version: 3,
    });
    expect(Object.keys(inRegistryOrder(orders.fields, { ship_to: null, id: 1 }))).toEqual(['id', 'ship_to']);
  });
});
