import {
  createIntegrator,
  RUN_MODES,
  startTestPlatform,
  startWebhookReceiver,
  type Integrator,
  type RunningPlatform,
  type WebhookReceiver,
} from '@ofp/testing';

/** API.md §8 through the real processes: a subscription, then signed deliveries of record changes. */
describe.each(RUN_MODES)('webhooks through the platform ($mode)', ({ mode }) => {
  let platform: RunningPlatform;
  let integrator: Integrator;
  let receiver: WebhookReceiver;
  let secret = '';

  beforeAll(async () => {
    platform = await startTestPlatform(mode, { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
    integrator = await createIntegrator(platform, { name: 'Subscriber' });
    receiver = await startWebhookReceiver({ secrets: () => [secret] });
  }, 120_000);
  afterAll(async () => {
    await receiver?.close();
    await platform?.stop();
  }, 60_000);

  it('delivers signed record events, in sequence order, that a Standard Webhooks verifier accepts', async () => {
    const created = await integrator.request<{ id: number; secret: string }>('POST', '/v2/webhooks', {
      body: { url: receiver.url, events: ['person.created', 'person.updated'], description: 'e2e' },
    });
    expect(created.status).toBe(201);
    secret = created.body.results.secret;
    expect(secret).toMatch(/^whsec_/);
    const fetched = await integrator.request<Record<string, unknown>>(
      'GET',
      `/v2/webhooks/${created.body.results.id}`,
    );
    expect(fetched.body.results).not.toHaveProperty('secret');

    const person = await integrator.request<{ id: number }>('POST', '/v2/people', {
      body: { last_name: 'Hopper' },
    });
    // A change made inside the client's trace carries it to its webhook (API.md §8).
    const traceparent = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    await integrator.request('PUT', `/v2/people/${person.body.results.id}`, {
      body: { first_name: 'Grace' },
      headers: { traceparent },
    });
    await integrator.request('POST', '/v2/items', { body: { sku: 'NOT-SUBSCRIBED' } });

    await receiver.waitFor(
      (received) => received.filter((r) => r.payload?.data.id === person.body.results.id).length >= 2,
      20_000,
    );
    const deliveries = receiver.received.filter((r) => r.payload?.data.id === person.body.results.id);
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
    expect(receiver.received.some((r) => r.payload?.type.startsWith('item.'))).toBe(false);

    const list = await integrator.request<{ event_type: string; status: string }[]>(
      'GET',
      `/v2/webhook_deliveries?q=${encodeURIComponent(JSON.stringify({ filters: [{ operand: 'webhook_id', operator: '=', value: created.body.results.id }] }))}`,
    );
    expect(list.status).toBe(200);
    expect(list.body.results.map((d) => d.event_type).sort()).toEqual(['person.created', 'person.updated']);
  }, 60_000);
});
