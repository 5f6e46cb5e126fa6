// @runs-alone: counts deliveries per second against an endpoint's rate
import type { RecordJson } from '@ofp/contracts';
import { people } from '@ofp/models';
import { startWebhookReceiver, type WebhookReceiver } from '@ofp/testing';
import type { HostResolver } from './address-guard.js';
import { eventually, startDispatcherHarness, type DispatcherHarness } from '../testing/dispatcher-harness.js';

/** Record ids are unique per model across organizations: each test's organization has its own. */
const recordId = (orgId: number, n: number): number => orgId * 1000 + n;

/** The deliveries of an organization matching `filters`, oldest first. */
async function deliveries(
  harness: DispatcherHarness,
  orgId: number,
  filters: unknown[] = [],
): Promise<RecordJson[]> {
  const q = encodeURIComponent(JSON.stringify({ filters, limit: 500 }));
  const response = await harness.request('GET', `/webhook_deliveries?q=${q}`, { orgId });
  expect(response.status).toBe(200);
  return response.body.results as RecordJson[];
}

describe('webhook deliveries', () => {
  let harness: DispatcherHarness;
  const receivers: WebhookReceiver[] = [];
  let org = 100;

  beforeAll(async () => {
    harness = await startDispatcherHarness({ limits: { endpointConcurrency: 2, requestTimeoutMs: 1_000 } });
  });
  afterAll(async () => {
    await harness.close();
    for (const receiver of receivers) await receiver.close();
  });

  /** A new organization with one endpoint (subscribed to `events`) and its verifying receiver. */
  async function subscriber(events: string[] = ['*'], orgId = ++org) {
    let secrets: string[] = [];
    const receiver = await startWebhookReceiver({ secrets: () => secrets });
    receivers.push(receiver);
    const webhook = await harness.createWebhook(orgId, { url: receiver.url, events });
    secrets = [webhook.secret];
    return { orgId, receiver, webhook, setSecrets: (next: string[]) => (secrets = next) };
  }

  it('delivers each subscribed event once, signed, in the documented body', async () => {
    const { orgId, receiver, webhook } = await subscriber(['person.created', 'person.updated']);
    const created = await harness.appendRecordEvent({
      orgId,
      id: recordId(orgId, 1),
      version: 1,
      fields: { first_name: 'Ada' },
    });
    const updated = await harness.appendRecordEvent({
      orgId,
      id: recordId(orgId, 1),
      version: 2,
      fields: { first_name: 'Grace' },
      previous: { first_name: 'Ada' },
    });
    await harness.appendRecordEvent({
      orgId,
      model: 'items',
      singular: 'item',
      id: recordId(orgId, 5),
      version: 1,
    });
    await receiver.waitFor((r) => r.length >= 2);

    expect(receiver.received.every((r) => r.verified)).toBe(true);
    expect(receiver.received.map((r) => r.id)).toEqual([created.eventId, updated.eventId]);
    // The record's keys in registry order, as API responses give them (the event store keeps jsonb).
    const registryOrder = Object.keys(people.fields).filter(
      (name) => name in receiver.received[1]!.payload!.data,
    );
    expect(Object.keys(receiver.received[1]!.payload!.data)).toEqual(registryOrder);
    expect(receiver.received[1]!.payload).toEqual({
      id: updated.eventId,
      type: 'person.updated',
      timestamp: updated.recordedAt.toISOString(),
      sequence: 2,
      data: expect.objectContaining({ id: recordId(orgId, 1), first_name: 'Grace', version: 2 }),
      previous_attributes: { first_name: 'Ada' },
    });
    const done = await eventually(async () => {
      const rows = await deliveries(harness, orgId);
      return rows.length === 2 && rows.every((d) => d.status === 'succeeded') ? rows : undefined;
    }, 'both deliveries recorded');
    expect(done[1]).toEqual({
      id: expect.any(Number),
      webhook_id: webhook.id,
      event_id: updated.eventId,
      event_type: 'person.updated',
      status: 'succeeded',
      attempts: 1,
      next_attempt_at: null,
      last_status_code: 204,
      last_error: null,
      attempt_log: [
        {
          started_at: expect.any(String),
          duration_ms: expect.any(Number),
          status_code: 204,
          error_kind: null,
          error: null,
          response_excerpt: '',
        },
      ],
      // Kept with the delivery: the very bytes that were sent and signed.
      payload: receiver.received[1]!.body,
      external_id: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
      // Queued, then its attempt recorded.
      version: 2,
    });
    // The item event was not subscribed to: nothing more arrives.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(receiver.received).toHaveLength(2);
  });

  it('signs with both secrets during a rotation, so old and new secrets verify', async () => {
    const { orgId, receiver, webhook, setSecrets } = await subscriber();
    const rotated = await harness.request('POST', `/webhooks/${webhook.id}/rotate_secret`, { orgId });
    const next = (rotated.body.results as { secret: string }).secret;

    setSecrets([webhook.secret]);
    await harness.appendRecordEvent({ orgId, id: recordId(orgId, 1), version: 1 });
    await receiver.waitFor((r) => r.length === 1);
    setSecrets([next]);
    await harness.appendRecordEvent({ orgId, id: recordId(orgId, 1), version: 2 });
    await receiver.waitFor((r) => r.length === 2);

    expect(receiver.received.map((r) => r.verified)).toEqual([true, true]);
    expect(receiver.received.map((r) => r.signature.split(' ').length)).toEqual([2, 2]);
  });

  it('sends webhook.test to that endpoint alone', async () => {
    const first = await subscriber(['person.created']);
    const second = await subscriber(['*'], first.orgId);
    const response = await harness.request('POST', `/webhooks/${first.webhook.id}/test`, {
      orgId: first.orgId,
    });
    expect(response.status).toBe(201);
    const delivery = response.body.results as RecordJson;
    expect(delivery).toMatchObject({ webhook_id: first.webhook.id, event_type: 'webhook.test' });
    // The workers may claim it (or even deliver it) before the response reads it back.
    expect(['pending', 'succeeded']).toContain(delivery.status);
    expect(response.headers.get('location')).toBe(`/v2/webhook_deliveries/${delivery.id}`);
    await first.receiver.waitFor((r) => r.length === 1);
    expect(first.receiver.received[0]!.payload).toMatchObject({
      id: delivery.event_id,
      type: 'webhook.test',
      data: { id: first.webhook.id, url: first.receiver.url },
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(second.receiver.received).toEqual([]);
  });

  it('disables an endpoint that answers 410 at once and tells the organization’s other endpoints', async () => {
    const gone = await subscriber(['person.created', 'person.updated']);
    const watcher = await subscriber(['webhook.disabled'], gone.orgId);
    gone.receiver.answerWith(() => ({ status: 410 }));
    const event = await harness.appendRecordEvent({
      orgId: gone.orgId,
      id: recordId(gone.orgId, 1),
      version: 1,
    });

    await watcher.receiver.waitFor((r) => r.length === 1);
    expect(watcher.receiver.received[0]!.payload).toMatchObject({
      type: 'webhook.disabled',
      sequence: 2,
      data: { id: gone.webhook.id, enabled: false },
      previous_attributes: { enabled: true },
    });
    const webhook = await harness.request('GET', `/webhooks/${gone.webhook.id}`, { orgId: gone.orgId });
    expect(webhook.body.results).toMatchObject({ enabled: false, version: 2 });
    const [delivery] = await deliveries(harness, gone.orgId, [
      { operand: 'event_id', operator: '=', value: event.eventId },
    ]);
    expect(delivery).toMatchObject({ status: 'failed', attempts: 1, last_status_code: 410 });

    // Dot syntax reaches the deliveries of a webhook, and the attempts of a delivery.
    const search = async (path: string, filters: unknown[]) => {
      const q = encodeURIComponent(JSON.stringify({ filters }));
      const response = await harness.request('GET', `${path}?q=${q}`, { orgId: gone.orgId });
      return (response.body.results as RecordJson[]).map((r) => r.id);
    };
    expect(
      await search('/webhooks', [
        { operand: 'deliveries.status', operator: '=', value: 'failed' },
        { operand: 'deliveries.last_status_code', operator: '=', value: 410 },
      ]),
    ).toEqual([gone.webhook.id]);
    expect(
      await search('/webhook_deliveries', [
        { operand: 'attempt_log.status_code', operator: '=', value: 410 },
      ]),
    ).toEqual([delivery!.id]);

    // Nothing more is queued for it; its own webhook.disabled never went to itself.
    await harness.appendRecordEvent({ orgId: gone.orgId, id: recordId(gone.orgId, 1), version: 2 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(gone.receiver.received).toHaveLength(1);
    expect(
      await deliveries(harness, gone.orgId, [
        { operand: 'webhook_id', operator: '=', value: gone.webhook.id },
      ]),
    ).toHaveLength(1);
  });

  it('re-sends one finished delivery on retry, with the same webhook-id', async () => {
    const { orgId, receiver } = await subscriber();
    const event = await harness.appendRecordEvent({ orgId, id: recordId(orgId, 1), version: 1 });
    const [delivery] = await eventually(async () => {
      const rows = await deliveries(harness, orgId, [
        { operand: 'status', operator: '=', value: 'succeeded' },
      ]);
      return rows.length === 1 ? rows : undefined;
    }, 'the first delivery');
    const retried = await harness.request('POST', `/webhook_deliveries/${delivery!.id}/retry`, { orgId });
    expect(retried.status).toBe(200);
    expect(retried.body.results).toMatchObject({ status: 'pending' });
    await receiver.waitFor((r) => r.length === 2);
    expect(receiver.received.map((r) => r.id)).toEqual([event.eventId, event.eventId]);
    expect(
      (await harness.request('POST', `/webhook_deliveries/${delivery!.id}/retry`, { orgId: 1 })).status,
    ).toBe(404);
  });

  it('keeps the per-endpoint concurrency limit', async () => {
    const { orgId, receiver } = await subscriber();
    let inFlight = 0;
    let most = 0;
    receiver.answerWith(() => {
      inFlight++;
      most = Math.max(most, inFlight);
      setTimeout(() => inFlight--, 150);
      return { status: 200, delayMs: 150 };
    });
    for (let n = 1; n <= 8; n++)
      await harness.appendRecordEvent({ orgId, id: recordId(orgId, n), version: 1 });
    await receiver.waitFor((r) => r.length === 8);
    expect(most).toBe(2);
  });

  it('delivers no faster than the endpoint’s rate, each record’s events in order', async () => {
    const { orgId, receiver, webhook } = await subscriber();
    const rate = 10;
    const patched = await harness.request('PATCH', `/webhooks/${webhook.id}`, {
      orgId,
      body: { rate_limit: rate },
    });
    expect(patched.body.results).toMatchObject({ rate_limit: rate });
    // 10 records, 3 versions each: 30 deliveries, queued faster than 10 a second.
    for (let version = 1; version <= 3; version++)
      for (let n = 1; n <= 10; n++)
        await harness.appendRecordEvent({ orgId, id: recordId(orgId, n), version });
    await receiver.waitFor((r) => r.length === 30, 20_000);

    const times = receiver.received.map((r) => r.receivedAt.getTime());
    const seconds = (times.at(-1)! - times[0]!) / 1000;
    // One token at once at 10/s, then one every 100 ms: 29 spacings, about 2.9 s (a slower machine
    // only stretches it). Without the rate, 30 deliveries to a local receiver take a fraction of that.
    expect(seconds).toBeGreaterThanOrEqual(2.5);
    // Held-back deliveries go as their tokens come, not at the next poll (a second apart).
    expect(seconds).toBeLessThan(15);
    const mostInOneSecond = Math.max(...times.map((t) => times.filter((u) => u >= t && u < t + 1000).length));
    expect(mostInOneSecond).toBeLessThanOrEqual(rate + 2);
    for (let n = 1; n <= 10; n++) {
      const sequences = receiver.received
        .filter((r) => r.payload?.data.id === recordId(orgId, n))
        .map((r) => r.payload?.sequence);
      expect(sequences).toEqual([1, 2, 3]);
    }
  });

  it('records a timeout and keeps a bounded excerpt of the response body', async () => {
    const { orgId, receiver } = await subscriber();
    receiver.answerWith((delivery) =>
      delivery.payload?.data.id === recordId(orgId, 1)
        ? { status: 200, delayMs: 3_000 }
        : { status: 500, body: 'x'.repeat(5000) },
    );
    const slow = await harness.appendRecordEvent({ orgId, id: recordId(orgId, 1), version: 1 });
    const failing = await harness.appendRecordEvent({ orgId, id: recordId(orgId, 2), version: 1 });
    const byEvent = async (eventId: string) =>
      eventually(async () => {
        const [row] = await deliveries(harness, orgId, [
          { operand: 'event_id', operator: '=', value: eventId },
        ]);
        return row && row.attempts === 1 ? row : undefined;
      }, `the attempt of ${eventId}`);
    const timedOut = await byEvent(slow.eventId);
    expect(timedOut).toMatchObject({ status: 'pending', last_status_code: null });
    expect(timedOut.attempt_log).toEqual([
      expect.objectContaining({ error_kind: 'timeout', status_code: null }),
    ]);
    const refused = await byEvent(failing.eventId);
    expect(refused).toMatchObject({ status: 'pending', last_status_code: 500, last_error: 'HTTP 500' });
    const [attempt] = refused.attempt_log as { response_excerpt: string; error_kind: string }[];
    expect(attempt!.error_kind).toBe('http_status');
    expect(attempt!.response_excerpt).toBe('x'.repeat(1024));
  });

  it('delivers to an endpoint at once while a slow endpoint works off a long backlog', async () => {
    const slow = await subscriber();
    const fast = await subscriber();
    // Two at a time (the endpoint limit), half a second each: 4 a second.
    slow.receiver.answerWith(() => ({ status: 204, delayMs: 500 }));
    // Twice as many as a claim of the worker pool (64 in flight, 64 ahead) looks at, and more.
    const backlog = 600;
    for (let n = 1; n <= backlog; n += 50)
      await Promise.all(
        Array.from({ length: 50 }, (_, k) =>
          harness.appendRecordEvent({ orgId: slow.orgId, id: recordId(slow.orgId, n + k), version: 1 }),
        ),
      );
    const q = encodeURIComponent(JSON.stringify({ limit: 1 }));
    await eventually(async () => {
      const response = await harness.request('GET', `/webhook_deliveries?q=${q}`, { orgId: slow.orgId });
      return response.body.total_results === backlog ? true : undefined;
    }, 'the slow endpoint’s backlog queued');

    // The fast endpoint's deliveries, queued behind all of it, go as soon as they are due.
    const waited: number[] = [];
    for (let n = 1; n <= 3; n++) {
      const appended = performance.now();
      await harness.appendRecordEvent({ orgId: fast.orgId, id: recordId(fast.orgId, n), version: 1 });
      await fast.receiver.waitFor((r) => r.length === n, 10_000);
      waited.push(performance.now() - appended);
    }
    // Locally a few tens of milliseconds each (the intake's poll, a claim, the request); behind the
    // backlog, as before the claim took each endpoint apart, over a minute (500 of them at 4 a second).
    expect(Math.max(...waited)).toBeLessThan(3_000);
    expect(slow.receiver.received.length).toBeLessThan(backlog / 2);
    // Its queue given up, so that it does not keep sending while the other tests run.
    await harness.request('PATCH', `/webhooks/${slow.webhook.id}`, {
      orgId: slow.orgId,
      body: { enabled: false },
    });
  });

  it('records every other attempt when one can never be recorded, counts it and goes on', async () => {
    const { orgId, receiver, webhook } = await subscriber();
    const failures = async (cause: string): Promise<number> =>
      (
        await harness.dispatcher.metrics.getSingleMetric('webhook_attempt_recordings_failed_total')!.get()
      ).values.find((value) => value.labels.cause === cause)?.value ?? 0;
    const permanentBefore = await failures('permanent');
    // The attempt log refuses the attempts of record 1's delivery, as a constraint would: an error
    // that no retry changes.
    const refused = `people-${recordId(orgId, 1)}`;
    const pool = harness.database.pool;
    await pool.query(
      `CREATE FUNCTION webhooks.refuse_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         IF (SELECT stream_id FROM webhooks.webhook_deliveries WHERE id = NEW.record_id) = '${refused}' THEN
           RAISE EXCEPTION 'attempt refused by the test' USING ERRCODE = 'check_violation';
         END IF;
         RETURN NEW;
       END $$;
       CREATE TRIGGER refuse_attempt BEFORE INSERT ON webhooks.webhook_deliveries__attempt_log
         FOR EACH ROW EXECUTE FUNCTION webhooks.refuse_attempt()`,
    );
    try {
      // Answers that come together, so that attempts are recorded in batches with the refused one.
      receiver.answerWith(() => ({ status: 204, delayMs: 50 }));
      const first = await harness.appendRecordEvent({ orgId, id: recordId(orgId, 1), version: 1 });
      for (let n = 2; n <= 10; n++)
        await harness.appendRecordEvent({ orgId, id: recordId(orgId, n), version: 1 });
      await eventually(async () => {
        const rows = await deliveries(harness, orgId);
        return rows.filter((row) => row.status === 'succeeded').length === 9 ? true : undefined;
      }, 'every delivery but the refused one recorded');
      const [left] = await deliveries(harness, orgId, [
        { operand: 'status', operator: '=', value: 'pending' },
      ]);
      expect(left).toMatchObject({ event_id: first.eventId, attempts: 0 });
      // Still claimed: its claim lapses after leaseMs (10 minutes), then it is sent again.
      const { rows: queued } = await pool.query<{ claimed_by: number | null }>(
        `SELECT claimed_by FROM webhooks.delivery_queue WHERE delivery_id = $1`,
        [left!.id],
      );
      expect(queued).toEqual([{ claimed_by: expect.any(Number) }]);
      const permanent = (await failures('permanent')) - permanentBefore;
      expect(permanent).toBeGreaterThanOrEqual(1);

      // The queue goes on; the refused attempt is not tried again meanwhile.
      const later = await harness.appendRecordEvent({ orgId, id: recordId(orgId, 11), version: 1 });
      await eventually(async () => {
        const [row] = await deliveries(harness, orgId, [
          { operand: 'event_id', operator: '=', value: later.eventId },
        ]);
        return row?.status === 'succeeded' ? true : undefined;
      }, 'a later delivery recorded');
      expect((await failures('permanent')) - permanentBefore).toBe(permanent);
      expect(receiver.received.filter((r) => r.payload?.data.id === recordId(orgId, 1))).toHaveLength(1);
    } finally {
      await pool.query(
        `DROP TRIGGER refuse_attempt ON webhooks.webhook_deliveries__attempt_log;
         DROP FUNCTION webhooks.refuse_attempt()`,
      );
      await harness.request('PATCH', `/webhooks/${webhook.id}`, { orgId, body: { enabled: false } });
    }
  });

  it('counts attempts by outcome, and the queue depth, in its metrics', async () => {
    const text = await harness.dispatcher.metrics.metrics();
    expect(text).toMatch(/webhook_delivery_attempts_total\{outcome="succeeded"\} [1-9]/);
    expect(text).toMatch(/webhook_delivery_attempt_duration_seconds_count\{outcome="succeeded"\} [1-9]/);
    expect(text).toMatch(/webhook_delivery_queue_depth\{status="pending"\} \d+/);
  });
});

describe('the SSRF guard at delivery time', () => {
  let harness: DispatcherHarness;
  let receiver: WebhookReceiver;
  let rebound = false;
  // DNS rebinding: public when the webhook is created, loopback when it is delivered to.
  const resolveHost: HostResolver = async (hostname) => {
    if (hostname !== 'rebind.example.test')
      throw Object.assign(new Error('ENOTFOUND'), { code: 'ENOTFOUND' });
    return [{ address: rebound ? '127.0.0.1' : '93.184.216.34', family: 4 }];
  };

  beforeAll(async () => {
    harness = await startDispatcherHarness({ allowPrivateTargets: false, resolveHost });
    receiver = await startWebhookReceiver({ secrets: () => [] });
  });
  afterAll(async () => {
    await harness.close();
    await receiver.close();
  });

  it('refuses a host name that resolves to 127.0.0.1 without connecting to it', async () => {
    const url = `https://rebind.example.test:${receiver.port}/hooks`;
    const { id } = await harness.createWebhook(1, { url, events: ['*'] });
    rebound = true;
    const event = await harness.appendRecordEvent({ orgId: 1, id: 1, version: 1 });
    const delivery = await eventually(async () => {
      const [row] = await deliveries(harness, 1, [
        { operand: 'event_id', operator: '=', value: event.eventId },
      ]);
      return row && row.attempts === 1 ? row : undefined;
    }, 'the refused attempt');
    expect(delivery).toMatchObject({
      webhook_id: id,
      status: 'pending',
      last_error: 'rebind.example.test resolves to 127.0.0.1: loopback',
    });
    expect(delivery.attempt_log).toEqual([expect.objectContaining({ error_kind: 'blocked' })]);
    expect(receiver.connections()).toBe(0);
  });
});
