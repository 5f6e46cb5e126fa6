import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { MODELS, type FieldMap, type ModelDefinition } from '@ofp/models';
import {
  createIntegrator,
  RUN_MODES,
  searchPath,
  startTestPlatform,
  stockOf,
  type Integrator,
  type RunningPlatform,
  UNLIMITED_RATE,
} from '@ofp/testing';
import { webhooks } from '@ofp/webhook-dispatcher';

// Hostile input over HTTP (issue 23, API.md §1, §3, §12): random hostile values for every column of
// every model a client writes, created and updated, and bodies that are no JSON or no UTF-8. After each,
// no 5xx, and the next ordinary writes of another organization (a person; a stock adjustment, which the
// inventory manager derives) are visible at once: nothing the hostile write got appended stops a
// consumer.

/** Hostile writes per run mode; `HOSTILE_RUNS=2000` for a longer run (docs/testing.md). */
const RUNS = Number(process.env.HOSTILE_RUNS ?? 150);
/** Longer than an ordinary write takes, far shorter than the read-your-writes timeout (5 s) it would wait out. */
const ORDINARY_WRITE_MS = 2_500;

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
interface HostileWrite {
  readonly kind: 'create' | 'update';
  readonly model: string;
  readonly path: Path;
  readonly value: string;
}

/** A body that is no JSON object or no UTF-8. */
type JunkBody = { readonly kind: 'junk'; readonly model: string; readonly bytes: Buffer };

const WRITTEN = new Map(
  [...Object.values(MODELS).filter((model) => model.writes !== 'read-only'), webhooks].map((model) => [
    model.name,
    model,
  ]),
);

const hostileWrite: fc.Arbitrary<HostileWrite> = fc.constantFrom(...WRITTEN.values()).chain((model) =>
  fc.record({
    kind: fc.constantFrom<'create' | 'update'>(
      ...(model.writes === 'all' ? (['create', 'update'] as const) : (['create'] as const)),
    ),
    model: fc.constant(model.name),
    path: fc.constantFrom(...fieldPaths(model.fields)),
    value: hostileJson,
  }),
);

const junkBody: fc.Arbitrary<JunkBody> = fc.record({
  kind: fc.constant('junk' as const),
  model: fc.constantFrom(...WRITTEN.keys()),
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

describe.each(RUN_MODES)('hostile values for every column of every model ($mode)', ({ mode }) => {
  let platform: RunningPlatform;
  let hostile: Integrator;
  let bystander: Integrator;
  /** A valid body per model, and a record of it to update, both of the hostile organization. */
  const bodies = new Map<ModelDefinition, () => Record<string, unknown>>();
  const records = new Map<ModelDefinition, number>();

  beforeAll(async () => {
    platform = await startTestPlatform(mode, {
      KAFKA_TOPIC_PREFIX: `e2e.${randomUUID().slice(0, 8)}.`,
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      ...UNLIMITED_RATE,
    });
    hostile = await createIntegrator(platform, { name: 'Hostile' });
    bystander = await createIntegrator(platform, { name: 'Bystander' });
    const create = async (model: ModelDefinition, body: Record<string, unknown>): Promise<number> => {
      const response = await hostile.request<{ id: number }>('POST', `/v2/${model.name}`, { body });
      if (response.status !== 201) throw new Error(`${model.name}: ${response.status} ${response.text}`);
      return response.body.results.id;
    };
    const unique = () => randomUUID().slice(0, 12);
    const line = { sku: 'SKU-1', quantity: 2 };
    const person = await create(MODELS.people!, { last_name: 'Base' });
    const order = await create(MODELS.orders!, { order_number: `SO-${unique()}`, customer_id: person });
    const fulfillment = await create(MODELS.fulfillment_orders!, {
      order_id: order,
      warehouse: 'W',
      lines: [line],
    });
    const shape: Record<string, () => Record<string, unknown>> = {
      people: () => ({
        last_name: 'L',
        phone_numbers: [{ number: '5551234', phone_number_type: { name: 'Work' } }],
      }),
      phone_number_types: () => ({ name: `T-${unique()}` }),
      items: () => ({ sku: `SKU-${unique()}`, price: '1.00', weight: '1.000' }),
      orders: () => ({
        order_number: `SO-${unique()}`,
        customer_id: person,
        ship_to: { name: 'N', country: 'US' },
        lines: [{ ...line, unit_price: '1.00' }],
      }),
      fulfillment_orders: () => ({
        order_id: order,
        warehouse: 'W',
        ship_to: { country: 'US' },
        lines: [line],
      }),
      shipments: () => ({
        fulfillment_order_id: fulfillment,
        packages: [{ tracking_number: 'T', weight: '1.000', lines: [{ sku: 'SKU-1', quantity: 1 }] }],
      }),
      purchase_orders: () => ({
        po_number: `PO-${unique()}`,
        warehouse: 'W',
        lines: [{ ...line, unit_cost: '1.00' }],
      }),
      invoices: () => ({
        invoice_number: `IN-${unique()}`,
        order_id: order,
        lines: [{ quantity: 1, unit_price: '1.00' }],
      }),
      inventory_adjustments: () => ({ sku: 'SKU-1', warehouse: 'W', quantity_delta: 1 }),
      webhooks: () => ({ url: 'http://127.0.0.1:9/hook', events: ['*'], enabled: false }),
    };
    for (const model of WRITTEN.values()) {
      const body = shape[model.name];
      if (!body) throw new Error(`no valid body for ${model.name}: add one`);
      bodies.set(model, body);
      if (model.writes === 'all' && model.name !== 'shipments')
        records.set(model, await create(model, body()));
    }
    // A shipment ships what its fulfillment order holds: one to update, of a second fulfillment order.
    const shipped = await create(MODELS.fulfillment_orders!, {
      order_id: order,
      warehouse: 'W',
      lines: [line],
    });
    records.set(MODELS.shipments!, await create(MODELS.shipments!, { fulfillment_order_id: shipped }));
  }, 180_000);
  afterAll(async () => {
    await platform?.stop();
  }, 60_000);

  const send = async (method: string, path: string, body: Buffer | string): Promise<number> => {
    const base = path.startsWith('/v2/webhooks') ? platform.webhooksUrl : platform.apiUrl;
    const response = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${hostile.accessToken}`, 'content-type': 'application/json' },
      body,
    });
    await response.arrayBuffer();
    return response.status;
  };

  it('answers every hostile write with a 2xx or a 4xx, and the next writes of another organization are visible at once', async () => {
    let adjusted = 0;
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(
        fc.oneof({ weight: 9, arbitrary: hostileWrite }, { weight: 1, arbitrary: junkBody }),
        async (write) => {
          const model = WRITTEN.get(write.model)!;
          const update = write.kind === 'update';
          const path = `/v2/${model.name}${update ? `/${records.get(model)}` : ''}`;
          const body =
            write.kind === 'junk' ? write.bytes : withValueAt(bodies.get(model)!(), write.path, write.value);
          const status = await send(update ? 'PUT' : 'POST', path, body);
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
          expect(status).toBeLessThan(500);

          const started = Date.now();
          const lastName = `Bystander ${randomUUID()}`;
          const person = await bystander.request('POST', '/v2/people', { body: { last_name: lastName } });
          expect(person.status).toBe(201);
          const adjustment = await bystander.request('POST', '/v2/inventory_adjustments', {
            body: { sku: 'B-1', warehouse: 'W', quantity_delta: 1 },
          });
          expect(adjustment.status).toBe(201);
          adjusted++;
          expect(Date.now() - started).toBeLessThan(2 * ORDINARY_WRITE_MS);
          const found = await bystander.request<unknown[]>(
            'GET',
            searchPath('people', { filters: [{ operand: 'last_name', operator: '=', value: lastName }] }),
          );
          expect(found.body.count).toBe(1);
          expect(await stockOf(bystander, 'B-1', 'W')).toMatchObject({ on_hand: adjusted });
        },
      ),
      { numRuns: RUNS, seed: Number(process.env.HOSTILE_SEED ?? Date.now() % 2 ** 31), verbose: true },
    );
    // The hostile values were mostly refused, not mostly ignored: the test reached the validation.
    expect([...statuses.keys()].filter((status) => status >= 400)).toEqual(
      expect.arrayContaining([400, 422]),
    );
  }, 900_000);
});
