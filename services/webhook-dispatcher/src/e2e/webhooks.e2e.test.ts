// @runs-alone: a delivery within 2 s of the write that raised it, timed
import { createPlatformClient, searchQuery, type PlatformClient, type Schema } from '@ofp/client';
import {
  createIntegrator,
  ingressFetch,
  loadContract,
  RUN_MODES,
  startTestPlatform,
  startWebhookReceiver,
  type Contract,
  type RunningPlatform,
  type WebhookReceiver,
} from '@ofp/testing';

/**
 * API.md §8 through the real processes and the typed client (`@ofp/client`, generated from
 * docs/openapi.json): every response is checked against the document as it arrives, and every
 * delivery body against the document's `webhooks` entry of its type, so a drift between the document
 * and what the platform answers or sends fails here.
 */
describe.each(RUN_MODES)('webhooks through the platform ($mode)', ({ mode }) => {
  let platform: RunningPlatform;
  let contract: Contract;
  let api: PlatformClient;
  /** Subscribed to person.created and person.updated. */
  let people: WebhookReceiver;
  /** Subscribed to every event type (`*`). */
  let everything: WebhookReceiver;
  const secrets = { people: '', everything: '' };

  beforeAll(async () => {
    contract = await loadContract();
    platform = await startTestPlatform(mode, { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
    const integrator = await createIntegrator(platform, { name: 'Subscriber' });
    api = createPlatformClient({
      baseUrl: platform.apiUrl,
      token: integrator.accessToken,
      fetch: ingressFetch(platform),
    });
    api.use(contract.middleware);
    people = await startWebhookReceiver({ secrets: () => [secrets.people] });
    everything = await startWebhookReceiver({ secrets: () => [secrets.everything] });
  }, 120_000);
  afterAll(async () => {
    await people?.close();
    await everything?.close();
    await platform?.stop();
  }, 60_000);

  /** A webhook of `events` to `receiver`: its id and secret. */
  async function subscribe(receiver: WebhookReceiver, events: Schema<'WebhookCreate'>['events']) {
    const { data } = await api.POST('/v2/webhooks', {
      body: { url: receiver.url, events, description: 'e2e' },
    });
    expect(data?.results.secret).toMatch(/^whsec_/);
    return data!.results;
  }

  it('lists the event types a webhook may subscribe to, each with its model', async () => {
    const { data } = await api.GET('/v2/webhook_event_types');
    expect(data?.results).toContainEqual({
      type: 'person.created',
      model: 'people',
      description: 'A person was created',
    });
    expect(data?.results.map(({ type }) => type).sort()).toEqual([...contract.webhookTypes].sort());
  });

  it('delivers signed record events, in sequence order, that a Standard Webhooks verifier accepts', async () => {
    const webhook = await subscribe(people, ['person.created', 'person.updated']);
    secrets.people = webhook.secret;
    const fetched = await api.GET('/v2/webhooks/{id}', { params: { path: { id: webhook.id } } });
    expect(fetched.data?.results).not.toHaveProperty('secret');

    const person = (await api.POST('/v2/people', { body: { last_name: 'Hopper' } })).data!.results;
    // A change made inside the client's trace carries it to its webhook (API.md §8).
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    await api.PUT('/v2/people/{id}', {
      params: { path: { id: person.id } },
      body: { first_name: 'Grace' },
      headers: { traceparent },
    });
    await api.POST('/v2/items', { body: { sku: 'NOT-SUBSCRIBED' } });

    await people.waitFor(
      (received) => received.filter((r) => r.payload?.data.id === person.id).length >= 2,
      20_000,
    );
    const deliveries = people.received.filter((r) => r.payload?.data.id === person.id);
    expect(deliveries.every((d) => d.verified)).toBe(true);
    expect(deliveries.map((d) => [d.payload!.type, d.payload!.sequence])).toEqual([
      ['person.created', 1],
      ['person.updated', 2],
    ]);
    expect(deliveries[1]!.payload!.previous_attributes).toEqual({ first_name: null });
    expect(deliveries.map((d) => d.traceparent)).toEqual([undefined, traceparent]);
    expect(deliveries[1]!.payload!.data).toMatchObject({
      first_name: 'Grace',
      last_name: 'Hopper',
      version: 2,
    });
    expect(people.received.some((r) => r.payload?.type.startsWith('item.'))).toBe(false);

    const list = await api.GET('/v2/webhook_deliveries', {
      params: {
        query: {
          q: searchQuery<'WebhookDeliveriesQuery'>({
            filters: [{ operand: 'webhook_id', operator: '=', value: webhook.id }],
          }),
        },
      },
    });
    expect(list.data?.results.map((d) => d.event_type).sort()).toEqual(['person.created', 'person.updated']);
  }, 60_000);

  it('keeps an endpoint to the rate set on its webhook, and lets it be raised', async () => {
    let secret = '';
    const receiver = await startWebhookReceiver({ secrets: () => [secret] });
    try {
      const { data: created } = await api.POST('/v2/webhooks', {
        body: { url: receiver.url, events: ['item.created'], rate_limit: 4 },
      });
      secret = created!.results.secret;
      const { id } = created!.results;
      const read = await api.GET('/v2/webhooks/{id}', { params: { path: { id } } });
      expect(read.data?.results.rate_limit).toBe(4);
      const refused = await api.PATCH('/v2/webhooks/{id}', {
        params: { path: { id } },
        body: { rate_limit: 0 },
      });
      expect(refused.response.status).toBe(422);

      await api.PATCH('/v2/webhooks/{id}', { params: { path: { id } }, body: { rate_limit: 2 } });
      for (let k = 0; k < 9; k++) await api.POST('/v2/items', { body: { sku: `RATED-${mode}-${k}` } });
      await receiver.waitFor((r) => r.length >= 3, 30_000);
      const raisedAt = Date.now();
      const raised = await api.PATCH('/v2/webhooks/{id}', {
        params: { path: { id } },
        body: { rate_limit: 1_000 },
      });
      expect(raised.data?.results.rate_limit).toBe(1_000);
      await receiver.waitFor((r) => r.length === 9, 30_000);
      const times = receiver.received.map((r) => r.receivedAt.getTime());
      // 2 a second: the first at once, then one every 500 ms (more on a slow machine).
      expect(times[2]! - times[0]!).toBeGreaterThanOrEqual(900);
      // Raised, the 6 held back go at once, where 2 a second would take 3 s more.
      expect(times.at(-1)! - raisedAt).toBeLessThan(2_000);
      expect(receiver.received.map((r) => r.payload?.data.sku).sort()).toEqual(
        Array.from({ length: 9 }, (_, k) => `RATED-${mode}-${k}`),
      );
      expect(receiver.received.every((r) => r.verified)).toBe(true);
    } finally {
      await receiver.close();
    }
  }, 90_000);

  it('sends every event of a fulfillment scenario with a body that the document describes for its type', async () => {
    const webhook = await subscribe(everything, ['*']);
    secrets.everything = webhook.secret;
    const warehouse = 'WH-E2E';
    const sku = 'CONTRACT-1';

    await api.POST('/v2/phone_number_types', { body: { name: 'Pager' } });
    const person = (
      await api.POST('/v2/people', {
        body: {
          last_name: 'Lovelace',
          phone_numbers: [{ number: '5551234', phone_number_type: { name: 'Pager' } }],
        },
      })
    ).data!.results;
    await api.PATCH('/v2/people/{id}', { params: { path: { id: person.id } }, body: { company: 'AE' } });
    await api.DELETE('/v2/people/{id}', { params: { path: { id: person.id } } });
    const item = (await api.POST('/v2/items', { body: { sku, name: 'Contract widget' } })).data!.results;
    await api.POST('/v2/inventory_adjustments', {
      body: { sku, warehouse, quantity_delta: 10, reason: 'count' },
    });

    const po = (
      await api.POST('/v2/purchase_orders', {
        body: { po_number: 'PO-C1', warehouse, lines: [{ sku, quantity: 5, unit_cost: '2.50' }] },
      })
    ).data!.results;
    await api.PUT('/v2/purchase_orders/{id}', { params: { path: { id: po.id } }, body: { status: 'open' } });
    await api.PUT('/v2/purchase_orders/{id}', {
      params: { path: { id: po.id } },
      body: { lines: [{ sku, quantity: 5, unit_cost: '2.50', quantity_received: 5 }] },
    });

    const rma = (
      await api.POST('/v2/returns', {
        body: { rma_number: 'RMA-C1', warehouse, lines: [{ sku, quantity: 1, disposition: 'restock' }] },
      })
    ).data!.results;
    await api.PUT('/v2/returns/{id}', { params: { path: { id: rma.id } }, body: { status: 'authorized' } });
    await api.PUT('/v2/returns/{id}', {
      params: { path: { id: rma.id } },
      body: { lines: [{ sku, quantity: 1, quantity_received: 1 }] },
    });

    const order = (
      await api.POST('/v2/orders', {
        body: {
          order_number: 'SO-C1',
          status: 'open',
          lines: [{ item_id: item.id, sku, quantity: 2, unit_price: '10.00' }],
        },
      })
    ).data!.results;
    const fulfillment = (
      await api.POST('/v2/fulfillment_orders', {
        body: { order_id: order.id, warehouse, lines: [{ sku, quantity: 2 }] },
      })
    ).data!.results;
    const shipment = (
      await api.POST('/v2/shipments', {
        body: {
          fulfillment_order_id: fulfillment.id,
          packages: [{ tracking_number: 'T-C1', lines: [{ sku, quantity: 2 }] }],
        },
      })
    ).data!.results;
    for (const status of ['in_transit', 'out_for_delivery', 'delivered'] as const)
      await api.PUT('/v2/shipments/{id}', { params: { path: { id: shipment.id } }, body: { status } });

    const invoice = (
      await api.POST('/v2/invoices', {
        body: { invoice_number: 'INV-C1', order_id: order.id, lines: [{ quantity: 2, unit_price: '10.00' }] },
      })
    ).data!.results;
    await api.PUT('/v2/invoices/{id}', {
      params: { path: { id: invoice.id } },
      body: { amount_paid: '20.00' },
    });
    const cancelled = (
      await api.POST('/v2/orders', { body: { order_number: 'SO-C2', lines: [{ sku, quantity: 1 }] } })
    ).data!.results;
    await api.PUT('/v2/orders/{id}', {
      params: { path: { id: cancelled.id } },
      body: { status: 'cancelled' },
    });
    await api.POST('/v2/webhooks/{id}/test', { params: { path: { id: webhook.id } } });

    const expected = [
      'person.created',
      'person.updated',
      'person.deleted',
      'phone_number_type.created',
      'item.created',
      'inventory_adjustment.created',
      'inventory.created',
      'inventory.updated',
      'purchase_order.created',
      'purchase_order.updated',
      'purchase_order.received',
      'return.created',
      'return.updated',
      'return.received',
      'order.created',
      'fulfillment_order.created',
      'fulfillment_order.shipped',
      'shipment.created',
      'shipment.tracking_updated',
      'shipment.delivered',
      'invoice.created',
      'invoice.paid',
      'order.cancelled',
      'webhook.test',
    ];
    const types = () => new Set(everything.received.map((r) => r.payload?.type));
    await everything
      .waitFor(() => expected.every((type) => types().has(type)), 30_000)
      .catch(() => {
        throw new Error(`missing deliveries: ${expected.filter((type) => !types().has(type)).join(', ')}`);
      });
    expect(everything.received.filter((r) => !r.verified)).toEqual([]);
    const problems = everything.received.flatMap((r) =>
      contract.deliveryProblems(r.body).map((problem) => `${r.payload?.type}: ${problem}`),
    );
    expect(problems).toEqual([]);
    // Records come with their keys in the order API responses give them, at every depth (the event
    // store keeps them as jsonb, which orders keys its own way).
    const createdData = (type: string) =>
      everything.received.find((r) => r.payload?.type === type)?.payload?.data;
    expect(keyOrder(createdData('person.created'))).toEqual(keyOrder(person));
    expect(keyOrder(createdData('shipment.created'))).toEqual(keyOrder(shipment));
  }, 90_000);
});

/** The keys of a JSON value at every depth, in their order (the values left out). */
function keyOrder(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(keyOrder);
  if (typeof value !== 'object' || value === null) return null;
  return Object.entries(value).map(([key, nested]) => [key, keyOrder(nested)]);
}
