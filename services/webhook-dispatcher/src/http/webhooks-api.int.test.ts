import type { RecordChange, RecordJson } from '@ofp/contracts';
import { START } from '@ofp/event-store';
import type { HostResolver } from '../delivery/address-guard.js';
import { startDispatcherHarness, type DispatcherHarness } from '../testing/dispatcher-harness.js';

const HOOK = { url: 'https://hooks.example.test/orders', events: ['person.created', 'person.updated'] };

describe('the webhooks endpoints', () => {
  let harness: DispatcherHarness;

  beforeAll(async () => {
    harness = await startDispatcherHarness();
  });
  afterAll(async () => {
    await harness.close();
  });

  it('shows the secret on create and never again in a GET or a search', async () => {
    const created = await harness.request('POST', '/webhooks', { body: { ...HOOK, description: 'orders' } });
    expect(created.status).toBe(201);
    const record = created.body.results as RecordJson & { secret: string };
    expect(record.secret).toMatch(/^whsec_/);
    expect(created.headers.get('location')).toBe(`/v2/webhooks/${record.id}`);
    expect(created.headers.get('etag')).toBe('W/"1"');
    expect(record).toEqual({
      id: record.id,
      url: HOOK.url,
      events: HOOK.events,
      description: 'orders',
      enabled: true,
      rate_limit: null,
      external_id: null,
      created_at: expect.any(String),
      updated_at: expect.any(String),
      version: 1,
      secret: record.secret,
    });

    const got = await harness.request('GET', `/webhooks/${record.id}`);
    expect(got.status).toBe(200);
    const { secret: _secret, ...withoutSecret } = record;
    expect(got.body.results).toEqual(withoutSecret);
    const searched = await harness.request('GET', '/webhooks');
    expect(JSON.stringify(searched.body)).not.toContain('whsec_');
    expect(JSON.stringify(got.body)).not.toContain('secret');
  });

  it('replays a write with the same Idempotency-Key, and refuses the key for another request', async () => {
    const org = 41;
    const key = { 'idempotency-key': 'create-hook-1' };
    const first = await harness.request('POST', '/webhooks', { orgId: org, body: HOOK, headers: key });
    expect(first.status).toBe(201);
    const again = await harness.request('POST', '/webhooks', { orgId: org, body: HOOK, headers: key });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    expect(again.body).toEqual(first.body);
    expect((await harness.request('GET', '/webhooks', { orgId: org })).body.total_results).toBe(1);

    const other = await harness.request('POST', '/webhooks', {
      orgId: org,
      body: { ...HOOK, description: 'another' },
      headers: key,
    });
    expect(other.status).toBe(422);
    // A failed write keeps nothing: the key then serves the corrected request.
    const badKey = { 'idempotency-key': 'create-hook-2' };
    const refused = await harness.request('POST', '/webhooks', {
      orgId: org,
      body: { ...HOOK, url: 'ftp://example.test' },
      headers: badKey,
    });
    expect(refused.status).toBe(422);
    expect(
      (await harness.request('POST', '/webhooks', { orgId: org, body: HOOK, headers: badKey })).status,
    ).toBe(201);
    const malformed = await harness.request('POST', '/webhooks', {
      orgId: org,
      body: HOOK,
      headers: { 'idempotency-key': '' },
    });
    expect(malformed.status).toBe(400);
  });

  it('makes each write with an Idempotency-Key once, racing requests included, and replays its first response', async () => {
    const org = 42;
    const keyed = (key: string) => ({ orgId: org, headers: { 'idempotency-key': key } });
    const twice = async (method: string, path: string, key: string, body?: unknown) => {
      const first = await harness.request(method, path, { ...keyed(key), body });
      const again = await harness.request(method, path, { ...keyed(key), body });
      expect(first.status).toBeLessThan(300);
      expect(again.status).toBe(first.status);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(again.headers.get('etag')).toBe(first.headers.get('etag'));
      expect(again.headers.get('location')).toBe(first.headers.get('location'));
      expect(again.body).toEqual(first.body);
      return first;
    };

    // Racing creates with one key: one webhook, and every answer is its creation's, secret included.
    const racing = await Promise.all(
      Array.from({ length: 6 }, () => harness.request('POST', '/webhooks', { ...keyed('race'), body: HOOK })),
    );
    expect(racing.map((response) => response.status)).toEqual(Array(6).fill(201));
    expect(new Set(racing.map((response) => JSON.stringify(response.body))).size).toBe(1);
    expect(new Set(racing.map((response) => response.headers.get('location'))).size).toBe(1);
    expect((await harness.request('GET', '/webhooks', { orgId: org })).body.total_results).toBe(1);
    const id = (racing[0]!.body.results as RecordJson).id;

    // Racing changes pinned to one version with one key: one change, and no loser's 412.
    const pinned = await Promise.all(
      Array.from({ length: 4 }, () =>
        harness.request('PATCH', `/webhooks/${id}`, {
          orgId: org,
          headers: { 'idempotency-key': 'pinned', 'if-match': 'W/"1"' },
          body: { description: 'once' },
        }),
      ),
    );
    expect(pinned.map((response) => response.status)).toEqual(Array(4).fill(200));
    expect(new Set(pinned.map((response) => JSON.stringify(response.body))).size).toBe(1);
    expect(pinned[0]!.body.results).toMatchObject({ description: 'once', version: 2 });

    // A write that changes nothing is answered, and replayed, all the same.
    await twice('PATCH', `/webhooks/${id}`, 'unchanged', { description: 'once' });
    const rotated = await twice('POST', `/webhooks/${id}/rotate_secret`, 'rotate');
    const { rows } = await harness.database.pool.query<{ body: string }>(
      "SELECT body FROM webhooks.idempotency_keys WHERE org_id = $1 AND key = 'rotate'",
      [org],
    );
    // The new secret is kept only sealed (API.md §12), and replayed in clear.
    const secret = (rotated.body.results as { secret: string }).secret;
    expect(rows[0]!.body).toMatch(/^ofp-sealed:v1:/);
    expect(rows[0]!.body).not.toContain(secret);
    const tested = await twice('POST', `/webhooks/${id}/test`, 'test');
    expect(tested.status).toBe(201);
    const sent = await harness.database.pool.query(
      "SELECT 1 FROM webhooks.webhook_deliveries WHERE webhook_id = $1 AND event_type = 'webhook.test'",
      [id],
    );
    expect(sent.rowCount).toBe(1);
    const since = new Date(Date.now() - 3_600_000).toISOString();
    await twice('POST', `/webhooks/${id}/recover`, 'recover', { since });

    // A write refused inside its transaction (a disabled endpoint's recover) keeps no answer for its key.
    await harness.request('PATCH', `/webhooks/${id}`, { orgId: org, body: { enabled: false } });
    const disabled = await harness.request('POST', `/webhooks/${id}/recover`, {
      ...keyed('refused'),
      body: { since },
    });
    expect(disabled.status).toBe(409);

    const deleted = await twice('DELETE', `/webhooks/${id}`, 'delete');
    expect(deleted.body.results).toMatchObject({ id, version: 4 });
    const kept = await harness.database.pool.query<{ key: string }>(
      'SELECT key FROM webhooks.idempotency_keys WHERE org_id = $1 ORDER BY key',
      [org],
    );
    expect(kept.rows.map((row) => row.key)).toEqual([
      'delete',
      'pinned',
      'race',
      'recover',
      'rotate',
      'test',
      'unchanged',
    ]);
  });

  it('answers rotate_secret with a new secret, still absent from GET', async () => {
    const { id, secret } = await harness.createWebhook(1, HOOK);
    const rotated = await harness.request('POST', `/webhooks/${id}/rotate_secret`);
    expect(rotated.status).toBe(200);
    const next = (rotated.body.results as { secret: string }).secret;
    expect(next).toMatch(/^whsec_/);
    expect(next).not.toBe(secret);
    expect(JSON.stringify((await harness.request('GET', `/webhooks/${id}`)).body)).not.toContain('whsec_');
  });

  it('appends webhook.created, updated and deleted events whose records carry no secret', async () => {
    const { id } = await harness.createWebhook(1, HOOK);
    const updated = await harness.request('PATCH', `/webhooks/${id}`, { body: { enabled: false } });
    expect(updated.status).toBe(200);
    expect(updated.body.results).toMatchObject({ enabled: false, version: 2 });
    expect((await harness.request('DELETE', `/webhooks/${id}`)).status).toBe(200);
    expect((await harness.request('GET', `/webhooks/${id}`)).status).toBe(404);

    const events = await harness.store.readStream(`webhooks-${id}`);
    expect(events.map((e) => [e.type, e.streamType, e.version, e.orgId])).toEqual([
      ['webhook.created', 'webhooks', 1, 1],
      ['webhook.updated', 'webhooks', 2, 1],
      ['webhook.deleted', 'webhooks', 3, 1],
    ]);
    const change = events[1]!.data as RecordChange;
    expect(change.previous).toEqual({ enabled: true });
    expect(change.record).toMatchObject({ id, enabled: false, events: HOOK.events });
    expect(JSON.stringify(events.map((e) => e.data))).not.toContain('whsec_');
    expect(JSON.stringify(await harness.store.readAll(START, { limit: 1000 }))).not.toContain('whsec_');
  });

  it('validates bodies with every problem named by column', async () => {
    const missing = await harness.request('POST', '/webhooks', { body: { description: 'x' } });
    expect(missing.status).toBe(422);
    expect(missing.body.errors).toEqual({ url: ['is required'], events: ['is required'] });
    const wrong = await harness.request('POST', '/webhooks', {
      body: {
        url: 'https://hooks.example.test',
        events: ['person.created', 'nothing.happened', 3],
        enabled: 'yes',
        rate_limit: 0,
      },
    });
    expect(wrong.status).toBe(422);
    expect(Object.keys(wrong.body.errors ?? {}).sort()).toEqual([
      'enabled',
      'events[1]',
      'events[2]',
      'rate_limit',
    ]);
    // A rate: whole deliveries per second, 1 to 10,000; null (or left out) is no limit.
    for (const rate_limit of [10_001, 2.5, '5', -1]) {
      const refused = await harness.request('POST', '/webhooks', { body: { ...HOOK, rate_limit } });
      expect([refused.status, Object.keys(refused.body.errors ?? {})]).toEqual([422, ['rate_limit']]);
    }
    const limited = await harness.createWebhook(1, { ...HOOK, rate_limit: 10_000 });
    expect(limited.record.rate_limit).toBe(10_000);
    expect((await harness.createWebhook(1, HOOK)).record.rate_limit).toBeNull();
    const unlimited = await harness.request('PATCH', `/webhooks/${limited.id}`, {
      body: { rate_limit: null },
    });
    expect(unlimited.body.results).toMatchObject({ rate_limit: null, version: 2 });
    expect(
      (await harness.request('POST', '/webhooks', { body: { ...HOOK, events: [] } })).body.errors,
    ).toEqual({
      events: ['must be a non-empty array of event types (such as "order.created") or ["*"]'],
    });
    const notJson = await fetch(`${harness.url}/webhooks`, {
      method: 'POST',
      headers: { authorization: 'Bearer test.1.write', 'content-type': 'text/plain' },
      body: 'url=x',
    });
    expect(notJson.status).toBe(415);
  });

  it('keeps each organization to its own webhooks', async () => {
    const { id } = await harness.createWebhook(1, HOOK);
    expect((await harness.request('GET', `/webhooks/${id}`, { orgId: 2 })).status).toBe(404);
    expect(
      (await harness.request('PATCH', `/webhooks/${id}`, { orgId: 2, body: { enabled: false } })).status,
    ).toBe(404);
    const taken = await harness.request('POST', `/webhooks/${id}`, { orgId: 2, body: HOOK });
    expect(taken.status).toBe(409);
    expect(taken.body.errors).toEqual({ id: ['has already been taken'] });
    const search = await harness.request('GET', '/webhooks', { orgId: 2 });
    expect(search.body.results).toEqual([]);
  });

  it('requires the write scope to write and the read scope to read', async () => {
    const { id } = await harness.createWebhook(1, HOOK);
    expect((await harness.request('POST', '/webhooks', { scopes: ['read'], body: HOOK })).status).toBe(403);
    expect(
      (await harness.request('POST', `/webhooks/${id}/rotate_secret`, { scopes: ['read'] })).status,
    ).toBe(403);
    expect((await harness.request('GET', `/webhooks/${id}`, { scopes: ['write'] })).status).toBe(403);
    expect((await harness.request('GET', `/webhooks/${id}`, { scopes: ['read'] })).status).toBe(200);
  });

  it('refuses a stale If-Match with 412 and answers disallowed methods with 405', async () => {
    const { id } = await harness.createWebhook(1, HOOK);
    const stale = await harness.request('PUT', `/webhooks/${id}`, {
      body: { description: 'changed' },
      headers: { 'if-match': 'W/"7"' },
    });
    expect(stale.status).toBe(412);
    const fresh = await harness.request('PUT', `/webhooks/${id}`, {
      body: { description: 'changed' },
      headers: { 'if-match': 'W/"1"' },
    });
    expect(fresh.status).toBe(200);
    expect(fresh.headers.get('etag')).toBe('W/"2"');
    const patchAll = await harness.request('PATCH', '/webhooks', { body: {} });
    expect(patchAll.status).toBe(405);
    expect(patchAll.headers.get('allow')).toBe('GET, POST');
    expect((await harness.request('DELETE', '/webhook_deliveries/1')).status).toBe(405);
  });

  it('searches webhooks with q on their columns, their event types and their deliveries', async () => {
    const org = 30;
    const a = await harness.createWebhook(org, {
      url: 'https://a.example.test/h',
      events: ['person.created'],
    });
    const b = await harness.createWebhook(org, {
      url: 'https://b.example.test/h',
      events: ['*'],
      enabled: false,
    });
    const ids = async (q: unknown): Promise<number[]> => {
      const response = await harness.request('GET', `/webhooks?q=${encodeURIComponent(JSON.stringify(q))}`, {
        orgId: org,
      });
      expect(response.status).toBe(200);
      return (response.body.results as RecordJson[]).map((r) => r.id);
    };
    expect(await ids({ filters: [{ operand: 'enabled', operator: '=', value: false }] })).toEqual([b.id]);
    expect(await ids({ filters: [{ operand: 'url', operator: '>', value: 'https://a.z' }] })).toEqual([b.id]);
    expect(await ids({ filters: [{ operand: 'events.type', operator: '=', value: '*' }] })).toEqual([b.id]);
    expect(await ids({ order: [{ column: 'url', direction: 'desc' }] })).toEqual([b.id, a.id]);
    expect(
      await ids({ filters: [{ operand: 'deliveries.status', operator: '=', value: 'pending' }] }),
    ).toEqual([]);

    const secret = await harness.request(
      'GET',
      `/webhooks?q=${encodeURIComponent(JSON.stringify({ filters: [{ operand: 'secret', operator: '!=', value: null }] }))}`,
      { orgId: org },
    );
    expect(secret.status).toBe(400);
    expect(secret.body.errors).toEqual({ 'q.filters[0].operand': ['unknown column "secret"'] });
  });

  it('validates recover: since is an RFC 3339 timestamp at most 14 days back', async () => {
    const { id } = await harness.createWebhook(1, HOOK);
    const recover = (since: unknown) =>
      harness.request('POST', `/webhooks/${id}/recover`, { body: { since } });
    const old = await recover(new Date(Date.now() - 15 * 24 * 3_600_000).toISOString());
    expect(old.status).toBe(422);
    expect(old.body.errors).toEqual({ since: ['must be at most 14 days ago'] });
    expect((await recover('yesterday')).body.errors).toEqual({
      since: ['must be an RFC 3339 timestamp such as 2026-11-21T07:30:00Z'],
    });
    expect((await recover(undefined)).status).toBe(422);
    const fine = await recover(new Date(Date.now() - 3_600_000).toISOString());
    expect(fine.status).toBe(200);
    expect(fine.body.results).toMatchObject({ webhook_id: id, recovered: 0 });
  });
});

describe('webhook URLs when private targets are not allowed', () => {
  let harness: DispatcherHarness;
  // Staged DNS: nothing here reaches the network.
  const answers: Record<string, string> = {
    'hooks.example.test': '93.184.216.34',
    'internal.example.test': '10.1.2.3',
    'localhost.example.test': '127.0.0.1',
  };
  const resolveHost: HostResolver = async (hostname) => {
    const address = answers[hostname];
    if (address === undefined) throw Object.assign(new Error(`ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return [{ address, family: 4 }];
  };

  beforeAll(async () => {
    harness = await startDispatcherHarness({ allowPrivateTargets: false, resolveHost });
  });
  afterAll(async () => {
    await harness.close();
  });

  // A refused target names the settings that would allow it (API.md §8).
  const ALLOWING =
    'a deployment allows such targets with WEBHOOK_ALLOW_PRIVATE_TARGETS=true, or WEBHOOK_ALLOWED_NETWORKS for given CIDR blocks';

  it.each([
    ['https://10.0.0.1/hooks', `must point to a public address (10.0.0.1 is private; ${ALLOWING})`],
    ['https://[::1]/hooks', `must point to a public address (::1 is loopback; ${ALLOWING})`],
    [
      'https://169.254.169.254/latest/meta-data',
      `must point to a public address (169.254.169.254 is link-local; ${ALLOWING})`,
    ],
    [
      'https://internal.example.test/hooks',
      `must point to a public address (internal.example.test resolves to 10.1.2.3, private; ${ALLOWING})`,
    ],
    [
      'https://localhost.example.test/hooks',
      `must point to a public address (localhost.example.test resolves to 127.0.0.1, loopback; ${ALLOWING})`,
    ],
    [
      'http://hooks.example.test/hooks',
      'must be an https URL (plain http is allowed only where the deployment sets WEBHOOK_ALLOW_PRIVATE_TARGETS=true)',
    ],
    ['https://user:password@hooks.example.test/hooks', 'must not contain credentials'],
    ['hooks.example.test/hooks', 'must be an absolute URL'],
  ])('refuses %s with a 422 naming url', async (url, message) => {
    const response = await harness.request('POST', '/webhooks', { body: { url, events: ['*'] } });
    expect(response.status).toBe(422);
    expect(response.body.errors).toEqual({ url: [message] });
  });

  it('accepts an https URL of a public host, and refuses to move it to a private one', async () => {
    const { id } = await harness.createWebhook(1, { url: 'https://hooks.example.test/hooks', events: ['*'] });
    const moved = await harness.request('PATCH', `/webhooks/${id}`, {
      body: { url: 'https://internal.example.test/hooks' },
    });
    expect(moved.status).toBe(422);
    expect(Object.keys(moved.body.errors ?? {})).toEqual(['url']);
  });
});
