import type { RecordJson } from '@ofp/contracts';
import type { StoredEvent } from '@ofp/event-store';
import { freePort, manualClock, startWebhookReceiver, type WebhookReceiver } from '@ofp/testing';
import { eventually, startDispatcherHarness, type DispatcherHarness } from '../testing/dispatcher-harness.js';
import { DELIVERY_FAILED_EVENT_TYPE } from '../models.js';
import { RETRY_DELAYS_MS } from './retry-schedule.js';

/** The jitter the tests inject (random 0.5 stretches every wait by 5%). */
const JITTER = 1.05;
const HOUR = 3_600_000;

describe('retries, order and recovery on an injected clock', () => {
  const clock = manualClock();
  let harness: DispatcherHarness;
  const receivers: WebhookReceiver[] = [];
  let org = 200;

  beforeAll(async () => {
    harness = await startDispatcherHarness({ clock, random: () => 0.5 });
  });
  afterAll(async () => {
    await harness.close();
    for (const receiver of receivers) await receiver.close();
  });

  const recordId = (orgId: number, n: number): number => orgId * 1000 + n;

  async function receiverFor(secret: () => string, port?: number): Promise<WebhookReceiver> {
    const receiver = await startWebhookReceiver({
      secrets: () => [secret()],
      clock,
      ...(port === undefined ? {} : { port }),
    });
    receivers.push(receiver);
    return receiver;
  }

  async function deliveryOf(orgId: number, eventId: string): Promise<RecordJson | undefined> {
    const q = encodeURIComponent(
      JSON.stringify({ filters: [{ operand: 'event_id', operator: '=', value: eventId }] }),
    );
    const [row] = (await harness.request('GET', `/webhook_deliveries?q=${q}`, { orgId })).body
      .results as RecordJson[];
    return row;
  }

  async function delivery(orgId: number, eventId: string): Promise<RecordJson> {
    const row = await deliveryOf(orgId, eventId);
    if (!row) throw new Error(`no delivery of ${eventId}`);
    return row;
  }

  /** Appends a record event and waits until the bus has queued its delivery. */
  async function append(orgId: number, n: number, version = 1): Promise<StoredEvent> {
    const event = await harness.appendRecordEvent({ orgId, id: recordId(orgId, n), version });
    await eventually(() => deliveryOf(orgId, event.eventId), `the delivery of ${event.type} ${n}`);
    return event;
  }

  /**
   * Waits until the organization has nothing in flight and nothing due at the clock's time, apart from
   * deliveries waiting for an earlier event of their record.
   */
  async function settled(orgId: number): Promise<void> {
    await eventually(async () => {
      const { rows } = await harness.database.pool.query<{ busy: number }>(
        `SELECT count(*)::int AS busy FROM webhooks.delivery_queue q
           JOIN webhooks.webhook_deliveries d ON d.id = q.delivery_id
          WHERE d.org_id = $1 AND (q.claimed_by IS NOT NULL OR q.due_at <= $2)`,
        [orgId, clock()],
      );
      return rows[0]!.busy === 0 ? true : undefined;
    }, `organization ${orgId} to settle`);
  }

  it('reaches a receiver down for three attempts at the fourth, at its scheduled time', async () => {
    const orgId = ++org;
    const port = await freePort();
    const { secret } = await harness.createWebhook(orgId, {
      url: `http://127.0.0.1:${port}/hooks`,
      events: ['*'],
    });
    const start = clock().getTime();
    const event = await append(orgId, 1);
    const schedule = [start];
    for (const wait of RETRY_DELAYS_MS.slice(0, 3)) schedule.push(schedule.at(-1)! + wait * JITTER);

    for (let attempt = 1; attempt <= 3; attempt++) {
      await eventually(
        async () => ((await deliveryOf(orgId, event.eventId))?.attempts === attempt ? true : undefined),
        `attempt ${attempt}`,
      );
      expect((await delivery(orgId, event.eventId)).next_attempt_at).toBe(
        new Date(schedule[attempt]!).toISOString(),
      );
      if (attempt < 3) clock.set(new Date(schedule[attempt]!));
    }
    const receiver = await receiverFor(() => secret, port);
    clock.set(new Date(schedule[3]! - 1_000));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(receiver.received).toEqual([]);
    clock.set(new Date(schedule[3]!));
    await receiver.waitFor((r) => r.length === 1);

    expect(receiver.received[0]).toMatchObject({ id: event.eventId, verified: true });
    expect(receiver.received[0]!.receivedAt.getTime()).toBe(schedule[3]);
    const done = await eventually(async () => {
      const row = await delivery(orgId, event.eventId);
      return row.status === 'succeeded' ? row : undefined;
    }, 'the delivery to succeed');
    const log = done.attempt_log as { started_at: string; error_kind: string | null }[];
    expect(log.map((a) => a.started_at)).toEqual(schedule.map((at) => new Date(at).toISOString()));
    expect(log.map((a) => a.error_kind)).toEqual(['refused', 'refused', 'refused', null]);
    expect(done.attempts).toBe(4);
  }, 60_000);

  it('delivers a record’s later event only after its earlier one succeeded, other records unhindered', async () => {
    const orgId = ++org;
    let secret = '';
    const receiver = await receiverFor(() => secret);
    secret = (await harness.createWebhook(orgId, { url: receiver.url, events: ['*'] })).secret;
    let failedOnce = false;
    receiver.answerWith((d) => {
      if (d.payload?.data.id === recordId(orgId, 1) && d.payload.sequence === 1 && !failedOnce) {
        failedOnce = true;
        return { status: 500 };
      }
      return { status: 204 };
    });
    const x1 = await append(orgId, 1);
    const x2 = await append(orgId, 1, 2);
    const y1 = await append(orgId, 2);
    await receiver.waitFor((r) => r.some((d) => d.id === y1.eventId) && r.some((d) => d.id === x1.eventId));
    await settled(orgId);
    expect(receiver.received.map((d) => d.id)).not.toContain(x2.eventId);
    expect((await delivery(orgId, x2.eventId)).status).toBe('pending');

    clock.advance(RETRY_DELAYS_MS[0]! * JITTER);
    await receiver.waitFor((r) => r.some((d) => d.id === x2.eventId));
    const forX = receiver.received.filter((d) => d.payload?.data.id === recordId(orgId, 1));
    expect(forX.map((d) => d.payload?.sequence)).toEqual([1, 1, 2]);
  }, 60_000);

  it('re-sends exactly the deliveries that failed since the time recover names', async () => {
    const orgId = ++org;
    let secret = '';
    const receiver = await receiverFor(() => secret);
    secret = (await harness.createWebhook(orgId, { url: receiver.url, events: ['*'] })).secret;
    const failing = new Set([recordId(orgId, 0), recordId(orgId, 1), recordId(orgId, 2)]);
    receiver.answerWith((d) => ({ status: failing.has(Number(d.payload?.data.id)) ? 500 : 204 }));

    const before = await append(orgId, 0);
    await settled(orgId);
    clock.advance(60_000);
    const since = clock();
    const e1 = await append(orgId, 1);
    const e2 = await append(orgId, 2);
    const ok = await append(orgId, 3);
    await receiver.waitFor((r) => r.filter((d) => d.verified).length >= 4);
    // Through the whole schedule: every wait is shorter than 11 h.
    for (let step = 0; step < RETRY_DELAYS_MS.length; step++) {
      await settled(orgId);
      clock.advance(11 * HOUR);
    }
    await settled(orgId);
    for (const event of [before, e1, e2]) {
      expect(await delivery(orgId, event.eventId)).toMatchObject({ status: 'failed', attempts: 8 });
    }
    const sentBefore = receiver.received.length;
    failing.clear();

    const { webhook_id: _id, ...recovered } = (
      await harness.request(
        'POST',
        `/webhooks/${(await delivery(orgId, e1.eventId)).webhook_id as number}/recover`,
        {
          orgId,
          body: { since: since.toISOString() },
        },
      )
    ).body.results as Record<string, unknown>;
    expect(recovered).toEqual({ since: since.toISOString(), recovered: 2 });
    await receiver.waitFor((r) => r.length === sentBefore + 2);
    await settled(orgId);
    expect(
      receiver.received
        .slice(sentBefore)
        .map((d) => d.id)
        .sort(),
    ).toEqual([e1.eventId, e2.eventId].sort());
    expect(await delivery(orgId, e1.eventId)).toMatchObject({ status: 'succeeded', attempts: 9 });
    expect(await delivery(orgId, before.eventId)).toMatchObject({ status: 'failed' });
    expect(receiver.received.filter((d) => d.id === ok.eventId)).toHaveLength(1);
  }, 60_000);

  it('honours Retry-After on a 429, and signs with the old secret for 24 hours after a rotation', async () => {
    const orgId = ++org;
    let secrets: string[] = [];
    const receiver = await startWebhookReceiver({ secrets: () => secrets, clock });
    receivers.push(receiver);
    const webhook = await harness.createWebhook(orgId, { url: receiver.url, events: ['*'] });
    const rotated = await harness.request('POST', `/webhooks/${webhook.id}/rotate_secret`, { orgId });
    secrets = [(rotated.body.results as { secret: string }).secret];
    receiver.answerWith(() => ({ status: 429, headers: { 'retry-after': '120' } }));

    const event = await append(orgId, 1);
    await eventually(
      async () => ((await deliveryOf(orgId, event.eventId))?.attempts === 1 ? true : undefined),
      'the 429',
    );
    const afterTooMany = await delivery(orgId, event.eventId);
    expect(afterTooMany.next_attempt_at).toBe(new Date(clock().getTime() + 120_000).toISOString());
    expect(receiver.received[0]!.signature.split(' ')).toHaveLength(2);

    receiver.answerWith(() => ({ status: 204 }));
    clock.advance(24 * HOUR + 1);
    await receiver.waitFor((r) => r.length === 2);
    expect(receiver.received[1]!.verified).toBe(true);
    expect(receiver.received[1]!.signature.split(' ')).toHaveLength(1);
  }, 60_000);

  it('gives up, instead of retrying, a delivery whose endpoint was disabled while it was in flight', async () => {
    const orgId = ++org;
    let secret = '';
    const receiver = await receiverFor(() => secret);
    const webhook = await harness.createWebhook(orgId, { url: receiver.url, events: ['person.created'] });
    secret = webhook.secret;
    receiver.answerWith(() => ({ status: 500, delayMs: 500 }));
    const event = await append(orgId, 1);
    await receiver.waitFor((r) => r.length === 1);
    const disabled = await harness.request('PATCH', `/webhooks/${webhook.id}`, {
      orgId,
      body: { enabled: false },
    });
    expect(disabled.status).toBe(200);
    await eventually(async () => {
      const row = await delivery(orgId, event.eventId);
      return row.attempts === 1 ? row : undefined;
    }, 'the attempt to be recorded');
    expect(await delivery(orgId, event.eventId)).toMatchObject({
      status: 'failed',
      attempts: 1,
      next_attempt_at: null,
    });
  });

  it('tells the other endpoints that subscribe to webhook.delivery_failed when a delivery is given up, once', async () => {
    const orgId = ++org;
    let secrets: [string, string, string] = ['', '', ''];
    const failing = await receiverFor(() => secrets[0]);
    const watcher = await receiverFor(() => secrets[1]);
    const bystander = await receiverFor(() => secrets[2]);
    // It subscribes to the notice too, but is not told about its own deliveries.
    const broken = await harness.createWebhook(orgId, {
      url: failing.url,
      events: ['person.created', DELIVERY_FAILED_EVENT_TYPE],
    });
    const watching = await harness.createWebhook(orgId, {
      url: watcher.url,
      events: [DELIVERY_FAILED_EVENT_TYPE],
    });
    const other = await harness.createWebhook(orgId, { url: bystander.url, events: ['webhook.disabled'] });
    secrets = [broken.secret, watching.secret, other.secret];
    failing.answerWith(() => ({ status: 500 }));

    const event = await append(orgId, 1);
    for (let step = 0; step < RETRY_DELAYS_MS.length; step++) {
      await settled(orgId);
      expect(watcher.received).toEqual([]);
      clock.advance(11 * HOUR);
    }
    await watcher.waitFor((r) => r.length === 1);
    await settled(orgId);

    const given = await delivery(orgId, event.eventId);
    expect(given).toMatchObject({ status: 'failed', attempts: 8, webhook_id: broken.id });
    const [notice] = watcher.received;
    expect(notice).toMatchObject({ verified: true, payload: { type: DELIVERY_FAILED_EVENT_TYPE } });
    expect(notice!.id).not.toBe(event.eventId);
    // The delivery as the API shows it, in the same key order, the body its attempts sent included.
    const { data } = JSON.parse(notice!.body) as { data: RecordJson };
    expect(JSON.stringify(data)).toBe(JSON.stringify(given));
    expect(data.payload).toBe(failing.received[0]!.body);
    // Not to the endpoint it is about, nor to one that does not subscribe to it; told once.
    expect(failing.received.map((r) => r.id)).toEqual(Array(8).fill(event.eventId));
    expect(bystander.received).toEqual([]);
    const { rows } = await harness.database.pool.query<{ notes: number }>(
      'SELECT count(*)::int AS notes FROM webhooks.delivery_failures',
    );
    expect(rows[0]!.notes).toBe(0);
    clock.advance(HOUR);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(watcher.received).toHaveLength(1);
  }, 60_000);

  it('disables an endpoint whose deliveries all failed for 5 days and tells the other endpoints', async () => {
    const orgId = ++org;
    let secrets: [string, string] = ['', ''];
    const failing = await receiverFor(() => secrets[0]);
    const watcher = await receiverFor(() => secrets[1]);
    const broken = await harness.createWebhook(orgId, { url: failing.url, events: ['person.created'] });
    const watching = await harness.createWebhook(orgId, { url: watcher.url, events: ['webhook.disabled'] });
    secrets = [broken.secret, watching.secret];
    failing.answerWith(() => ({ status: 500 }));

    const start = clock().getTime();
    for (let n = 1; clock().getTime() - start < 5 * 24 * HOUR; n++) {
      await append(orgId, n);
      await settled(orgId);
      const { body } = await harness.request('GET', `/webhooks/${broken.id}`, { orgId });
      expect(body.results).toMatchObject({ enabled: true });
      clock.advance(12 * HOUR);
    }
    await append(orgId, 99);

    await watcher.waitFor((r) => r.length === 1);
    expect(watcher.received[0]!.payload).toMatchObject({
      type: 'webhook.disabled',
      data: { id: broken.id, enabled: false },
    });
    expect((await harness.request('GET', `/webhooks/${broken.id}`, { orgId })).body.results).toMatchObject({
      enabled: false,
    });
    const q = encodeURIComponent(
      JSON.stringify({ filters: [{ operand: 'status', operator: '=', value: 'pending' }] }),
    );
    await eventually(async () => {
      const open = (await harness.request('GET', `/webhook_deliveries?q=${q}`, { orgId })).body
        .results as unknown[];
      return open.length === 0 ? true : undefined;
    }, 'the disabled endpoint’s queue to be given up');
  }, 60_000);
});
