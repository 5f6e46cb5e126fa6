import { randomBytes } from 'node:crypto';
import { BearerGate, TokenBucketLimiter } from '@ofp/auth-tokens';
import { PgLogBus } from '@ofp/bus';
import { SecretsKeyring, StartupError } from '@ofp/runtime';
import { startWebhookReceiver, testLogger, type WebhookReceiver } from '@ofp/testing';
import { createWebhookDispatcher } from './module.js';
import { eventually, startDispatcherHarness, type DispatcherHarness } from './testing/dispatcher-harness.js';

/**
 * API.md §12: the endpoints' signing secrets are stored sealed, and so is the response an idempotent
 * create or rotate_secret replays, which holds the new secret.
 */
describe('webhook secrets at rest', () => {
  let harness: DispatcherHarness;
  const receivers: WebhookReceiver[] = [];
  let org = 0;

  beforeAll(async () => {
    harness = await startDispatcherHarness();
  });

  afterAll(async () => {
    await harness.close();
    for (const receiver of receivers) await receiver.close();
  });

  /** What the tables hold for an endpoint and an organization's idempotency keys, as psql shows them. */
  async function stored(webhookId: number, orgId: number): Promise<string> {
    const { rows } = await harness.database.pool.query<{ text: string }>(
      `SELECT concat_ws(' ', e.secret, e.previous_secret, (SELECT string_agg(body, ' ')
                FROM webhooks.idempotency_keys k WHERE k.org_id = $2)) AS text
         FROM webhooks.endpoints e WHERE e.webhook_id = $1`,
      [webhookId, orgId],
    );
    return rows[0]!.text;
  }

  /** The secret as the tables could give it away: whole, its base64 part, or that part's bytes in hex. */
  function expectNowhere(secret: string, text: string): void {
    const base64 = secret.replace(/^whsec_/, '');
    expect(text).not.toContain(base64);
    expect(text).not.toContain(Buffer.from(base64, 'base64').toString('hex'));
  }

  it('keeps the secret sealed in the endpoint and in the replayed response, and replays it', async () => {
    const orgId = ++org;
    const headers = { 'idempotency-key': 'create-1' };
    const body = { url: 'http://127.0.0.1:9/hook', events: ['*'] };
    const created = await harness.request('POST', '/webhooks', { orgId, body, headers });
    expect(created.status).toBe(201);
    const { id, secret } = created.body.results as { id: number; secret: string };
    expect(secret).toMatch(/^whsec_/);
    const text = await stored(id, orgId);
    expect(text).toMatch(/^ofp-sealed:v1:/);
    expectNowhere(secret, text);

    const replayed = await harness.request('POST', '/webhooks', { orgId, body, headers });
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.body).toEqual(created.body);

    const rotated = await harness.request('POST', `/webhooks/${id}/rotate_secret`, {
      orgId,
      headers: { 'idempotency-key': 'rotate-1' },
    });
    expect(rotated.status).toBe(200);
    const next = (rotated.body.results as { secret: string }).secret;
    const after = await stored(id, orgId);
    expect(after.split(' ').every((part) => part.startsWith('ofp-sealed:v1:'))).toBe(true);
    expectNowhere(secret, after);
    expectNowhere(next, after);
  });

  it('signs deliveries with the secret it sealed, and with the previous one during a rotation', async () => {
    const orgId = ++org;
    let secrets: string[] = [];
    const receiver = await startWebhookReceiver({ secrets: () => secrets });
    receivers.push(receiver);
    const webhook = await harness.createWebhook(orgId, { url: receiver.url, events: ['*'] });
    secrets = [webhook.secret];
    await harness.appendRecordEvent({ orgId, id: 1000 * orgId + 1, version: 1 });
    await receiver.waitFor((r) => r.length >= 1);
    expect(receiver.received[0]!.verified).toBe(true);

    // After a rotation the old secret alone still verifies (both signatures are sent).
    await harness.request('POST', `/webhooks/${webhook.id}/rotate_secret`, { orgId });
    await harness.appendRecordEvent({ orgId, id: 1000 * orgId + 1, version: 2 });
    await receiver.waitFor((r) => r.length >= 2);
    expect(receiver.received[1]!.verified).toBe(true);
    expect(receiver.received[1]!.signature.split(' ')).toHaveLength(2);
  });

  it('fails only the deliveries of an endpoint whose secret does not open: named, counted, the others all sent', async () => {
    const orgId = ++org;
    let secrets: string[] = [];
    const working = await startWebhookReceiver({ secrets: () => secrets });
    const unreached = await startWebhookReceiver({ secrets: () => [] });
    receivers.push(working, unreached);
    const broken = await harness.createWebhook(orgId, { url: unreached.url, events: ['*'] });
    const webhook = await harness.createWebhook(orgId, { url: working.url, events: ['*'] });
    secrets = [webhook.secret];
    // The broken endpoint's sealed secret replaced, in Postgres, with the other's: sealed for another
    // row, it does not open (as a value altered, or sealed with a key no longer in the file).
    await harness.database.pool.query(
      `UPDATE webhooks.endpoints b SET secret = w.secret FROM webhooks.endpoints w
        WHERE b.webhook_id = $1 AND w.webhook_id = $2`,
      [broken.id, webhook.id],
    );
    const unopened = async (): Promise<number> =>
      (await harness.dispatcher.metrics.getSingleMetric('webhook_secrets_unopened_total')!.get()).values[0]!
        .value;
    const before = await unopened();

    const records = 12;
    for (let n = 1; n <= records; n++)
      await harness.appendRecordEvent({ orgId, id: 1000 * orgId + n, version: 1 });
    const people = (received: readonly { payload?: { type: string } | undefined }[]) =>
      received.filter((delivery) => delivery.payload?.type === 'person.created');
    await working.waitFor((received) => people(received).length >= records, 20_000);
    expect(working.received.every((delivery) => delivery.verified)).toBe(true);
    expect(unreached.received).toEqual([]);

    const q = encodeURIComponent(
      JSON.stringify({
        filters: [
          { operand: 'webhook_id', operator: '=', value: broken.id },
          { operand: 'event_type', operator: '=', value: 'person.created' },
        ],
      }),
    );
    const failed = await eventually(async () => {
      const { body } = await harness.request('GET', `/webhook_deliveries?q=${q}`, { orgId });
      const results = body.results as {
        attempts: number;
        last_error: string | null;
        attempt_log: { error_kind: string }[];
      }[];
      return results.length === records && results.every((d) => d.attempts >= 1) ? results : undefined;
    }, "the broken endpoint's deliveries attempted");
    for (const delivery of failed) {
      expect(delivery.last_error).toMatch(
        /^not sent: the endpoint's signing secret does not open with SECRETS_KEY_FILE \(key test does not open webhooks\.endpoints:\["\d+"\]/,
      );
      expectNowhere(broken.secret, delivery.last_error!);
      expectNowhere(webhook.secret, delivery.last_error!);
      expect(delivery.attempt_log[0]!.error_kind).toBe('secret');
    }
    expect((await unopened()) - before).toBeGreaterThanOrEqual(records);
  });

  /** The dispatcher again on the same database, as a restarted process with `secrets`: its start. */
  async function restart(secrets: SecretsKeyring): Promise<unknown> {
    const logger = testLogger('restarted-dispatcher');
    const { pool, session } = harness.database;
    const dispatcher = createWebhookDispatcher({
      pool,
      session,
      store: harness.store,
      bus: new PgLogBus(pool, session, harness.store, logger),
      logger,
      clock: () => new Date(),
      // It serves no HTTP here.
      gate: new BearerGate(
        { verify: () => Promise.reject(new Error('no HTTP here')) },
        new TokenBucketLimiter({ capacity: 1, refillPerSecond: 1 }, () => new Date()),
      ),
      publicUrl: 'http://localhost',
      allowPrivateTargets: true,
      secrets,
    });
    try {
      await dispatcher.delivery.start();
    } catch (error) {
      return error;
    }
    await dispatcher.delivery.stop();
    return undefined;
  }

  it('seals at start the secrets stored in clear before, and deliveries still verify', async () => {
    const orgId = ++org;
    let secrets: string[] = [];
    const receiver = await startWebhookReceiver({ secrets: () => secrets });
    receivers.push(receiver);
    const webhook = await harness.createWebhook(orgId, { url: receiver.url, events: ['*'] });
    secrets = [webhook.secret];
    // A database from before: the secret in clear.
    await harness.database.pool.query('UPDATE webhooks.endpoints SET secret = $1 WHERE webhook_id = $2', [
      webhook.secret,
      webhook.id,
    ]);
    expect(await restart(harness.secrets)).toBeUndefined();
    const text = await stored(webhook.id, orgId);
    expect(text).toMatch(/^ofp-sealed:v1:/);
    expectNowhere(webhook.secret, text);
    await harness.appendRecordEvent({ orgId, id: 1000 * orgId + 1, version: 1 });
    await receiver.waitFor((r) => r.length >= 1);
    expect(receiver.received[0]!.verified).toBe(true);
  });

  it('refuses to start with a key that does not open the stored secrets: one line naming SECRETS_KEY_FILE', async () => {
    const refused = await restart(
      new SecretsKeyring([{ id: harness.secrets.currentId, key: randomBytes(32) }]),
    );
    expect(refused).toBeInstanceOf(StartupError);
    expect((refused as Error).message).toMatch(
      /^SECRETS_KEY_FILE: the secrets stored in webhooks\.(endpoints|idempotency_keys) do not open with these keys/,
    );
    expect((refused as Error).message).not.toContain('\n');
  });
});
