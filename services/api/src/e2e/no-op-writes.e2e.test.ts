import { randomUUID } from 'node:crypto';
import {
  createIntegrator,
  RUN_MODES,
  startTestPlatform,
  startWebhookReceiver,
  type Integrator,
  type RunningPlatform,
  type WebhookReceiver,
} from '@ofp/testing';

// API.md §5: a write that changes nothing is no change (same version, no event, no webhook), nested
// objects and lists compared by value whatever their key order; an event's previous_attributes holds
// exactly the changed fields; an idempotent replay is the first response, byte for byte.

type Json = Record<string, unknown> & { id: number; version: number };

/** The same object with its keys in reverse order, at every depth (lists keep their order). */
function reversed(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reversed);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(
    Object.entries(value)
      .reverse()
      .map(([key, each]) => [key, reversed(each)]),
  );
}

const address = {
  name: 'Ada',
  company: null,
  address1: '1 Quay',
  city: 'Port',
  postal_code: '1000',
  country: 'US',
};

interface Case {
  readonly model: string;
  readonly singular: string;
  /** The create body, given again as the no-op PUT (keys reversed). */
  readonly body: (ids: Record<string, number>) => Record<string, unknown>;
  /** A real change, and exactly the previous_attributes it must announce. */
  readonly change: Record<string, unknown>;
  readonly previous: Record<string, unknown>;
}

const suffix = randomUUID().slice(0, 8);
const CASES: Case[] = [
  {
    model: 'phone_number_types',
    singular: 'phone_number_type',
    body: () => ({ name: `Pager ${suffix}` }),
    change: { name: `Beeper ${suffix}` },
    previous: { name: `Pager ${suffix}` },
  },
  {
    model: 'people',
    singular: 'person',
    body: () => ({
      last_name: 'Hopper',
      first_name: null,
      phone_numbers: [{ number: '5550100', phone_number_type: { name: 'Work' } }],
    }),
    change: { first_name: 'Grace' },
    previous: { first_name: null },
  },
  {
    model: 'items',
    singular: 'item',
    body: () => ({ sku: `NOOP-${suffix}`, name: 'Widget', price: '1.50', active: true }),
    change: { name: 'Gadget' },
    previous: { name: 'Widget' },
  },
  {
    model: 'orders',
    singular: 'order',
    body: () => ({
      order_number: `SO-${suffix}`,
      notes: null,
      ship_to: address,
      lines: [{ sku: `NOOP-${suffix}`, quantity: 2, unit_price: '1.50' }],
    }),
    change: { status: 'open' },
    previous: { status: 'pending' },
  },
  {
    model: 'fulfillment_orders',
    singular: 'fulfillment_order',
    body: (ids) => ({
      order_id: ids.orders,
      warehouse: 'MAIN',
      ship_to: address,
      lines: [{ sku: `NOOP-${suffix}`, quantity: 2 }],
    }),
    change: { anticipated_ship_date: '2026-12-01' },
    previous: { anticipated_ship_date: null },
  },
  {
    model: 'shipments',
    singular: 'shipment',
    body: (ids) => ({
      fulfillment_order_id: ids.fulfillment_orders,
      carrier: null,
      packages: [{ tracking_number: `T-${suffix}`, lines: [{ sku: `NOOP-${suffix}`, quantity: 1 }] }],
    }),
    change: { carrier: 'UPS' },
    previous: { carrier: null },
  },
  {
    model: 'purchase_orders',
    singular: 'purchase_order',
    body: () => ({
      po_number: `PO-${suffix}`,
      vendor_name: 'Parts Inc',
      warehouse: 'MAIN',
      lines: [{ sku: `NOOP-${suffix}`, quantity: 5, unit_cost: '2.00' }],
    }),
    change: { vendor_name: 'Parts Ltd' },
    previous: { vendor_name: 'Parts Inc' },
  },
  {
    model: 'invoices',
    singular: 'invoice',
    body: (ids) => ({
      invoice_number: `INV-${suffix}`,
      order_id: ids.orders,
      lines: [{ description: 'Widgets', sku: `NOOP-${suffix}`, quantity: 2, unit_price: '1.50' }],
    }),
    change: { due_date: '2026-12-31' },
    previous: { due_date: null },
  },
];

describe.each(RUN_MODES)('writes that change nothing ($mode)', ({ mode }) => {
  let platform: RunningPlatform;
  let acme: Integrator;
  let receiver: WebhookReceiver;
  let secret = '';

  beforeAll(async () => {
    platform = await startTestPlatform(mode, {
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      KAFKA_TOPIC_PREFIX: `e2e.${randomUUID().slice(0, 8)}.`,
    });
    acme = await createIntegrator(platform, { name: 'No-op' });
    receiver = await startWebhookReceiver({ secrets: () => [secret] });
    const webhook = await acme.request<{ secret: string }>('POST', '/v2/webhooks', {
      body: {
        url: receiver.url,
        events: CASES.flatMap(({ singular }) => [`${singular}.created`, `${singular}.updated`]),
      },
    });
    expect(webhook.status).toBe(201);
    secret = webhook.body.results.secret;
  }, 180_000);
  afterAll(async () => {
    await receiver?.close();
    await platform?.stop();
  }, 60_000);

  it('keeps the version and sends nothing for a PUT of equal values, then announces exactly a real change', async () => {
    const ids: Record<string, number> = {};
    for (const { model, singular, body, change, previous } of CASES) {
      const created = await acme.request<Json>('POST', `/v2/${model}`, { body: body(ids) });
      expect({ model, status: created.status, errors: created.body.errors }).toEqual({
        model,
        status: 201,
        errors: null,
      });
      const id = created.body.results.id;
      ids[model] = id;

      const same = await acme.request<Json>('PUT', `/v2/${model}/${id}`, { body: reversed(body(ids)) });
      expect({ model, status: same.status, version: same.body.results.version }).toEqual({
        model,
        status: 200,
        version: 1,
      });
      expect(same.body.results).toEqual(created.body.results);
      // Also what the response gave: every field as stored, read-only ones ignored.
      const echoed = await acme.request<Json>('PUT', `/v2/${model}/${id}`, {
        body: reversed(created.body.results),
      });
      expect({ model, version: echoed.body.results.version }).toEqual({ model, version: 1 });

      const changed = await acme.request<Json>('PUT', `/v2/${model}/${id}`, { body: change });
      expect({ model, status: changed.status, version: changed.body.results.version }).toEqual({
        model,
        status: 200,
        version: 2,
      });
      const again = await acme.request<Json>('PUT', `/v2/${model}/${id}`, { body: reversed(change) });
      expect({ model, version: again.body.results.version }).toEqual({ model, version: 2 });

      await receiver.waitFor(
        (received) =>
          received.some((r) => r.payload?.type === `${singular}.updated` && r.payload.data.id === id),
        30_000,
      );
      const deliveries = receiver.received
        .filter((r) => r.payload?.type.startsWith(`${singular}.`) && r.payload.data.id === id)
        .map((r) => ({
          type: r.payload!.type,
          sequence: r.payload!.sequence,
          previous: r.payload!.previous_attributes,
        }));
      expect({ model, deliveries }).toEqual({
        model,
        deliveries: [
          { type: `${singular}.created`, sequence: 1, previous: {} },
          { type: `${singular}.updated`, sequence: 2, previous },
        ],
      });
    }
  }, 180_000);

  it('replays an Idempotency-Key with the first response, byte for byte', async () => {
    const key = randomUUID();
    const body = {
      order_number: `SO-R-${suffix}`,
      ship_to: address,
      lines: [{ sku: 'R', quantity: 1, unit_price: '2.00' }],
    };
    const first = await acme.request('POST', '/v2/orders', { body, headers: { 'idempotency-key': key } });
    const replay = await acme.request('POST', '/v2/orders', { body, headers: { 'idempotency-key': key } });
    expect(first.status).toBe(201);
    expect(replay.status).toBe(201);
    expect(replay.text).toBe(first.text);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    for (const header of ['etag', 'location', 'content-type'])
      expect({ header, value: replay.headers.get(header) }).toEqual({
        header,
        value: first.headers.get(header),
      });
  });
});
