// Hostile writes for property tests and the chaos run (issue 23, API.md §1, §3, §12): values no column
// takes as they are, put at any column of a valid body of a model, and bodies that are no JSON object
// or no UTF-8.
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type { FieldMap, ModelDefinition } from '@ofp/models';

type Path = readonly (string | number)[];

/** A column (or a relation) of a model, by its path in a body whose lists hold one element. */
function fieldPaths(fields: FieldMap, prefix: Path = []): Path[] {
  return Object.entries(fields).flatMap(([name, field]): Path[] => {
    const path = [...prefix, name];
    switch (field.kind) {
      case 'column':
      case 'reference':
        return [path];
      case 'list':
        return [path, ...fieldPaths(field.fields, [...path, 0])];
      case 'object':
        return [path, ...fieldPaths(field.fields, path)];
      case 'joined':
        return [];
    }
  });
}

const digits = (count: number) => '9'.repeat(count);

/** Values no column takes as they are, as JSON text (some are no JavaScript value: 2^63 as a number). */
const hostileJson: fc.Arbitrary<string> = fc.oneof(
  // Huge and tiny decimals, in strings and as numbers.
  fc.integer({ min: 16, max: 140_000 }).map((n) => JSON.stringify(digits(n))),
  fc.integer({ min: 16, max: 2_000 }).map((n) => digits(n)),
  fc.integer({ min: 5, max: 2_000 }).map((n) => JSON.stringify(`0.${'0'.repeat(n)}1`)),
  fc.constantFrom('"999999999999999.99995"', '"1000000000000000"', '"-1000000000000000.00"', '0.00001'),
  // Exponent forms, NaN and Infinity.
  fc.constantFrom(
    '"1e3"',
    '"1E+400"',
    '1e309',
    '-1e309',
    '1e-400',
    '1.5e300',
    '"NaN"',
    '"Infinity"',
    '"-Infinity"',
  ),
  // Integers beyond 32 and 53 bits, as numbers and strings.
  fc.constantFrom(
    '2147483648',
    '-2147483649',
    '9007199254740993',
    '9223372036854775807',
    '-9223372036854775808',
    '18446744073709551616',
    '"9223372036854775807"',
  ),
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
  // Lone surrogates (JSON.stringify escapes them), control characters, long and wide strings.
  fc
    .constantFrom('\ud800', 'x\udfff', '\udbff\ud800', 'a\u0000b', '\u0001\u001f\u007f', '\u2028\u2029')
    .map((text) => JSON.stringify(text)),
  fc.integer({ min: 256, max: 300_000 }).map((n) => JSON.stringify('x'.repeat(n))),
  fc.integer({ min: 101, max: 20_000 }).map((n) => JSON.stringify('😀'.repeat(n))),
  // Nested junk and values of the wrong shape.
  fc.integer({ min: 2, max: 200 }).map((depth) => `${'[{"a":'.repeat(depth)}1${'}]'.repeat(depth)}`),
  fc.jsonValue({ maxDepth: 4 }).map((value) => JSON.stringify(value)),
  fc.constantFrom('null', 'true', '{}', '[]', '[null]', '[[]]', '-1', '0', '1.5', '""', '" "'),
);

/** A body of the model with one hostile value at one of its paths. */
export interface HostileWrite {
  readonly kind: 'create' | 'update';
  readonly model: string;
  readonly path: Path;
  readonly value: string;
}

/** A body that is no JSON object or no UTF-8. */
export type JunkBody = { readonly kind: 'junk'; readonly model: string; readonly bytes: Buffer };

/** A write of one of `models` with one hostile value at one of its paths. */
export const hostileWrite = (models: readonly ModelDefinition[]): fc.Arbitrary<HostileWrite> =>
  fc.constantFrom(...models).chain((model) =>
    fc.record({
      kind: fc.constantFrom<'create' | 'update'>(
        ...(model.writes === 'all' ? (['create', 'update'] as const) : (['create'] as const)),
      ),
      model: fc.constant(model.name),
      path: fc.constantFrom(...fieldPaths(model.fields)),
      value: hostileJson,
    }),
  );

/** A body for one of `models` that is no JSON object or no UTF-8. */
export const junkBody = (models: readonly ModelDefinition[]): fc.Arbitrary<JunkBody> =>
  fc.record({
    kind: fc.constant('junk' as const),
    model: fc.constantFrom(...models.map((model) => model.name)),
    bytes: fc.oneof(
      fc
        .uint8Array({ minLength: 1, maxLength: 64 })
        .map((bytes) => Buffer.concat([Buffer.from('{"a":"'), bytes, Buffer.from('"}')])),
      fc
        .constantFrom('{"a":', '{"a":1}}', '\ufeff{}', '[', 'nul', '{"a":"\\ud800"}', '{"a":"\\x"}')
        .map((text) => Buffer.from(text)),
      fc
        .integer({ min: 33, max: 100_000 })
        .map((depth) => Buffer.from(`${'['.repeat(depth)}${']'.repeat(depth)}`)),
    ),
  });

/** The JSON text of `body` with `value` (JSON text) at `path`, the objects and lists on the way made. */
function withValueAt(body: Record<string, unknown>, path: Path, value: string): string {
  const marker = `__hostile_${randomUUID()}__`;
  const copy = structuredClone(body);
  let at: Record<string | number, unknown> = copy;
  path.slice(0, -1).forEach((key, index) => {
    const list = typeof path[index + 1] === 'number';
    const next = at[key];
    if (list ? !Array.isArray(next) : typeof next !== 'object' || next === null || Array.isArray(next))
      at[key] = list ? [{}] : {};
    at = at[key] as Record<string | number, unknown>;
  });
  at[path[path.length - 1]!] = marker;
  return JSON.stringify(copy).replace(JSON.stringify(marker), value);
}

/** The records a valid body refers to, of the organization that writes it. */
export interface BodyReferences {
  readonly person: number;
  readonly order: number;
  readonly fulfillmentOrder: number;
}

/**
 * A valid body of each model the api writes (a fresh unique key each call), referring to `references`:
 * the hostile value replaces one of its values, so that it is what the platform answers to.
 */
export function validBodies(references: BodyReferences): Record<string, () => Record<string, unknown>> {
  const unique = () => randomUUID().slice(0, 12);
  const line = { sku: 'SKU-1', quantity: 2 };
  return {
    people: () => ({
      last_name: 'L',
      phone_numbers: [{ number: '5551234', phone_number_type: { name: 'Work' } }],
    }),
    phone_number_types: () => ({ name: `T-${unique()}` }),
    items: () => ({ sku: `SKU-${unique()}`, price: '1.00', weight: '1.000' }),
    orders: () => ({
      order_number: `SO-${unique()}`,
      customer_id: references.person,
      ship_to: { name: 'N', country: 'US' },
      lines: [{ ...line, unit_price: '1.00' }],
    }),
    fulfillment_orders: () => ({
      order_id: references.order,
      warehouse: 'W',
      ship_to: { country: 'US' },
      lines: [line],
    }),
    shipments: () => ({
      fulfillment_order_id: references.fulfillmentOrder,
      packages: [{ tracking_number: 'T', weight: '1.000', lines: [{ sku: 'SKU-1', quantity: 1 }] }],
    }),
    purchase_orders: () => ({
      po_number: `PO-${unique()}`,
      warehouse: 'W',
      lines: [{ ...line, unit_cost: '1.00' }],
    }),
    invoices: () => ({
      invoice_number: `IN-${unique()}`,
      order_id: references.order,
      lines: [{ quantity: 1, unit_price: '1.00' }],
    }),
    returns: () => ({
      rma_number: `RMA-${unique()}`,
      order_id: references.order,
      warehouse: 'W',
      reason: 'damaged',
      lines: [{ ...line, disposition: 'restock' }],
    }),
    inventory_adjustments: () => ({ sku: 'SKU-1', warehouse: 'W', quantity_delta: 1 }),
  };
}

/** The bytes of a hostile write: the junk as it is, or a valid body with the hostile value at its path. */
export function hostileBody(
  write: HostileWrite | JunkBody,
  bodies: Readonly<Record<string, () => Record<string, unknown>>>,
): Buffer | string {
  if (write.kind === 'junk') return write.bytes;
  const body = bodies[write.model];
  if (!body) throw new Error(`no valid body for ${write.model}: add one`);
  return withValueAt(body(), write.path, write.value);
}
