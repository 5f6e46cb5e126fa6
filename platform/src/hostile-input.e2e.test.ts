// @runs-alone: writes after hostile ones must take under twice an ordinary write, timed
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { MODELS, type ModelDefinition } from '@ofp/models';
import {
  createIntegrator,
  hostileBody,
  hostileWrite,
  junkBody,
  validBodies,
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
// consumer. A third of the writes carry an Idempotency-Key (API.md §5), so that the key's hashing and
// recording face the hostile bodies too: sent again with the key, the write answers the same status (a
// 2xx replayed byte for byte, with Idempotent-Replayed), and the key with another body is a 422.

/** Hostile writes per run mode; `HOSTILE_RUNS=2000` for a longer run (docs/testing.md). */
const RUNS = Number(process.env.HOSTILE_RUNS ?? 150);
/** Longer than an ordinary write takes, far shorter than the read-your-writes timeout (5 s) it would wait out. */
const ORDINARY_WRITE_MS = 2_500;

const WRITTEN = [...Object.values(MODELS).filter((model) => model.writes !== 'read-only'), webhooks];

describe.each(RUN_MODES)('hostile values for every column of every model ($mode)', ({ mode }) => {
  let platform: RunningPlatform;
  let hostile: Integrator;
  let bystander: Integrator;
  /** A valid body per model, and a record of it to update, both of the hostile organization. */
  const bodies: Record<string, () => Record<string, unknown>> = {};
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
    const line = { sku: 'SKU-1', quantity: 2 };
    const person = await create(MODELS.people, { last_name: 'Base' });
    const order = await create(MODELS.orders, { order_number: `SO-${randomUUID()}`, customer_id: person });
    const fulfillmentOrder = await create(MODELS.fulfillment_orders, {
      order_id: order,
      warehouse: 'W',
      lines: [line],
    });
    Object.assign(bodies, validBodies({ person, order, fulfillmentOrder }), {
      webhooks: () => ({ url: 'http://127.0.0.1:9/hook', events: ['*'], enabled: false }),
    });
    for (const model of WRITTEN) {
      const body = bodies[model.name];
      if (!body) throw new Error(`no valid body for ${model.name}: add one`);
      if (model.writes === 'all' && model.name !== 'shipments')
        records.set(model, await create(model, body()));
    }
    // A shipment ships what its fulfillment order holds: one to update, of a second fulfillment order.
    const shipped = await create(MODELS.fulfillment_orders, {
      order_id: order,
      warehouse: 'W',
      lines: [line],
    });
    records.set(MODELS.shipments, await create(MODELS.shipments, { fulfillment_order_id: shipped }));
  }, 180_000);
  afterAll(async () => {
    await platform?.stop();
  }, 60_000);

  const send = async (
    method: string,
    path: string,
    body: Buffer | string,
    idempotencyKey?: string,
  ): Promise<{ status: number; replayed: string | null; bytes: Buffer }> => {
    const base = path.startsWith('/v2/webhooks') ? platform.webhooksUrl : platform.apiUrl;
    const response = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${hostile.accessToken}`,
        'content-type': 'application/json',
        ...(idempotencyKey === undefined ? {} : { 'idempotency-key': idempotencyKey }),
      },
      body,
    });
    const bytes = Buffer.from(await response.arrayBuffer());
    return { status: response.status, replayed: response.headers.get('idempotent-replayed'), bytes };
  };

  it('answers every hostile write with a 2xx or a 4xx, and the next writes of another organization are visible at once', async () => {
    let adjusted = 0;
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          { weight: 9, arbitrary: hostileWrite(WRITTEN) },
          { weight: 1, arbitrary: junkBody(WRITTEN) },
        ),
        fc.oneof({ weight: 2, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
        async (write, keyed) => {
          const model = WRITTEN.find((each) => each.name === write.model)!;
          const update = write.kind === 'update';
          const method = update ? 'PUT' : 'POST';
          const path = `/v2/${model.name}${update ? `/${records.get(model)}` : ''}`;
          const body = hostileBody(write, bodies);
          const key = keyed ? randomUUID() : undefined;
          const first = await send(method, path, body, key);
          const status = first.status;
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
          expect(status).toBeLessThan(500);
          if (key !== undefined) {
            // A retry with the key: a 2xx was recorded and is replayed byte for byte; a refused write
            // kept nothing, and its retry is refused again the same way.
            const again = await send(method, path, body, key);
            expect(again.status).toBe(status);
            if (status < 300) {
              expect(again.replayed).toBe('true');
              expect(again.bytes.equals(first.bytes)).toBe(true);
              expect((await send(method, path, '{}', key)).status).toBe(422);
            } else expect(again.replayed).toBeNull();
          }

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
