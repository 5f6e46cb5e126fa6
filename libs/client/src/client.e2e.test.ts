import { createHash, randomBytes } from 'node:crypto';
import {
  createIntegrator,
  startTestPlatform,
  startWebhookReceiver,
  type Integrator,
  type RunningPlatform,
  type WebhookReceiver,
} from '@ofp/testing';
import { OfpClient, PlatformError, WebhookVerificationError, verifyWebhook } from './index.js';

/**
 * `OfpClient` against a running platform (standalone), with a rate limit small enough that bursts
 * meet 429s: tokens of both grants, typed writes and reads, every page of a search both ways, the
 * events feed resumed from a saved cursor, retries, and a real delivery verified.
 */
describe('@ofp/client against the platform', () => {
  let platform: RunningPlatform;
  let integrator: Integrator;
  let ofp: OfpClient;
  /** Every request the client sent, as the platform got it. */
  const sent: {
    method: string;
    url: string;
    authorization: string | null;
    idempotencyKey: string | null;
    status: number;
    replayed: string | null;
  }[] = [];
  const recording = async (request: Request): Promise<Response> => {
    const response = await fetch(request);
    sent.push({
      method: request.method,
      url: request.url,
      authorization: request.headers.get('authorization'),
      idempotencyKey: request.headers.get('idempotency-key'),
      status: response.status,
      replayed: response.headers.get('idempotent-replayed'),
    });
    return response;
  };

  beforeAll(async () => {
    platform = await startTestPlatform('standalone', {
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      RATE_LIMIT_CAPACITY: '20',
      RATE_LIMIT_REFILL_PER_SECOND: '20',
    });
    integrator = await createIntegrator(platform, { name: 'SDK' });
    ofp = new OfpClient({
      baseUrl: platform.apiUrl,
      credentials: { clientId: integrator.clientId, clientSecret: integrator.clientSecret },
      fetch: recording,
    });
  }, 120_000);
  afterAll(() => platform?.stop(), 60_000);
  beforeEach(() => sent.splice(0));

  it('creates, reads and changes records with typed bodies; a refusal is a PlatformError with the envelope', async () => {
    const person = await ofp.create('people', {
      first_name: 'Ada',
      last_name: 'Lovelace',
      phone_numbers: [{ number: '5551234', phone_number_type: { name: 'Work' } }],
    });
    expect(person).toMatchObject({ last_name: 'Lovelace', version: 1 });
    expect(await ofp.get('people', person.id)).toEqual(person);
    const changed = await ofp.update('people', person.id, { company: 'Analytical Engines' }, { ifMatch: 1 });
    expect(changed).toMatchObject({ company: 'Analytical Engines', version: 2 });
    const stale = ofp.update('people', person.id, { company: 'Difference Engines' }, { ifMatch: 1 });
    await expect(stale).rejects.toBeInstanceOf(PlatformError);
    await expect(stale).rejects.toMatchObject({ status: 412, errors: { base: [expect.any(String)] } });
    await expect(ofp.get('people', 999_999)).rejects.toMatchObject({ status: 404 });
    const found = await ofp.search('people', {
      filters: [
        { operand: 'phone_numbers.phone_number_type.name', operator: '=', value: 'Work' },
        { operand: 'phone_numbers.number', operator: '=', value: '5551234' },
      ],
    });
    expect(found).toMatchObject({ totalResults: 1, offset: 0, results: [{ id: person.id }] });
    // The token came from the client-credentials grant (Basic client authentication, RFC 6749 §2.3.1);
    // every write carried an Idempotency-Key.
    const api = sent.filter(({ url }) => new URL(url).pathname.startsWith('/v2/'));
    expect(sent[0]).toMatchObject({ method: 'POST', url: `${platform.apiUrl}/oauth/token`, status: 200 });
    expect(sent[0]!.authorization).toMatch(/^Basic /);
    expect(api.every(({ authorization }) => authorization?.startsWith('Bearer ey'))).toBe(true);
    const writes = api.filter(({ method }) => method !== 'GET');
    expect(writes.length).toBeGreaterThan(0);
    expect(writes.filter(({ idempotencyKey }) => !/^[0-9a-f-]{36}$/.test(idempotencyKey ?? ''))).toEqual([]);
  });

  it('replays a write sent again with the same idempotency key', async () => {
    const first = await ofp.create('items', { sku: 'SDK-IDEMPOTENT' }, { idempotencyKey: 'sdk-item-1' });
    const again = await ofp.create('items', { sku: 'SDK-IDEMPOTENT' }, { idempotencyKey: 'sdk-item-1' });
    expect(again).toEqual(first);
  });

  it('retries a write whose answer was lost with the same key, so that it happens once', async () => {
    // The platform gets the write and commits it; the connection drops before the answer arrives.
    let dropped = 0;
    const lossy = new OfpClient({
      baseUrl: platform.apiUrl,
      credentials: { clientId: integrator.clientId, clientSecret: integrator.clientSecret },
      retry: { baseDelayMs: 10 },
      fetch: async (request) => {
        const response = await recording(request);
        if (request.method === 'POST' && new URL(request.url).pathname === '/v2/people' && dropped++ === 0) {
          await response.body?.cancel();
          throw new TypeError('fetch failed', { cause: new Error('socket hang up') });
        }
        return response;
      },
    });
    const person = await lossy.create('people', { last_name: 'Lost Answer' });
    const posts = sent.filter(({ method, url }) => method === 'POST' && url.endsWith('/v2/people'));
    expect(posts.map(({ status }) => status)).toEqual([201, 201]);
    expect(posts[1]!.idempotencyKey).toBe(posts[0]!.idempotencyKey);
    expect(posts[1]!.replayed).toBe('true');
    const found = await ofp.search('people', {
      filters: [{ operand: 'last_name', operator: '=', value: 'Lost Answer' }],
    });
    expect(found).toMatchObject({ totalResults: 1, results: [{ id: person.id }] });
  });

  it('reads every page of a search: by id when the order allows, else by offset', async () => {
    const names = ['Pager C', 'Pager A', 'Pager E', 'Pager B', 'Pager G', 'Pager D', 'Pager F'];
    const ids: number[] = [];
    for (const last_name of names) ids.push((await ofp.create('people', { last_name })).id);
    const pager = { operand: 'last_name', operator: 'in', value: names } as const;
    sent.splice(0);
    const byId: number[] = [];
    for await (const person of ofp.list('people', { filters: [pager], limit: 3 })) byId.push(person.id);
    expect(byId).toEqual(ids);
    const queries = sent.map(
      ({ url }) => JSON.parse(new URL(url).searchParams.get('q')!) as { filters: unknown[] },
    );
    expect(queries).toHaveLength(3);
    expect(queries[1]!.filters).toContainEqual({ operand: 'id', operator: '>', value: ids[2] });

    const byName: string[] = [];
    for await (const person of ofp.list('people', {
      filters: [pager],
      order: [{ column: 'last_name', direction: 'desc' }],
      limit: 3,
    }))
      byName.push(person.last_name);
    expect(byName).toEqual([...names].sort().reverse());
  });

  it('reads the events feed as an iterator, and resumes from a saved cursor', async () => {
    const types = ['inventory_adjustment.created'] as const;
    for (const sku of ['EV-1', 'EV-2', 'EV-3'])
      await ofp.create('inventory_adjustments', { sku, warehouse: 'main', quantity_delta: 5 });
    const events = ofp.events({ types, pageSize: 2 });
    const skus: string[] = [];
    for await (const event of events)
      if (event.type === 'inventory_adjustment.created') skus.push(event.data.sku);
    expect(skus).toEqual(['EV-1', 'EV-2', 'EV-3']);
    const saved = events.cursor!;
    await ofp.create('inventory_adjustments', { sku: 'EV-4', warehouse: 'main', quantity_delta: 1 });
    const resumed: string[] = [];
    for await (const event of ofp.events({ types, startingAfter: saved }))
      if (event.type === 'inventory_adjustment.created') resumed.push(event.data.sku);
    expect(resumed).toEqual(['EV-4']);

    // Following: the next event arrives while the stream polls.
    const controller = new AbortController();
    const following = ofp.events({
      types,
      startingAfter: saved,
      follow: true,
      pollIntervalMs: 100,
      signal: controller.signal,
    });
    const seen: string[] = [];
    const reading = (async () => {
      for await (const event of following) {
        if (event.type === 'inventory_adjustment.created') seen.push(event.data.sku);
        if (seen.length === 2) controller.abort();
      }
    })();
    await ofp.create('inventory_adjustments', { sku: 'EV-5', warehouse: 'main', quantity_delta: 1 });
    await reading;
    expect(seen).toEqual(['EV-4', 'EV-5']);
  });

  it('waits out 429s (Retry-After) so that a burst beyond the rate limit succeeds', async () => {
    const results = await Promise.all(Array.from({ length: 60 }, () => ofp.search('items', { limit: 1 })));
    expect(results).toHaveLength(60);
    expect(sent.filter(({ status }) => status === 429).length).toBeGreaterThan(0);
    expect(sent.filter(({ status }) => status !== 200 && status !== 429)).toEqual([]);
  }, 60_000);

  it('takes a new token when its token is revoked', async () => {
    await ofp.search('items', { limit: 1 });
    const token = sent[sent.length - 1]!.authorization!.replace('Bearer ', '');
    const revoked = await fetch(`${platform.authUrl}/oauth/revoke`, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`${integrator.clientId}:${integrator.clientSecret}`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ token }),
    });
    expect(revoked.status).toBe(200);
    // Revocation reaches the api within 5 s (API.md §7); until then the old token still works.
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && !sent.some(({ status }) => status === 401)) {
      await ofp.search('items', { limit: 1 });
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const refused = sent.findIndex(({ status }) => status === 401);
    expect(refused).toBeGreaterThanOrEqual(0);
    expect(sent[refused + 1]).toMatchObject({ status: 200 });
    expect(sent[refused + 1]!.authorization).not.toBe(`Bearer ${token}`);
  }, 30_000);

  it('renews tokens with a refresh token, handing each new refresh token over to be kept', async () => {
    const verifier = randomBytes(32).toString('base64url');
    const authorize = new URL(`${platform.authUrl}/oauth/authorize`);
    authorize.search = new URLSearchParams({
      response_type: 'code',
      client_id: integrator.clientId,
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
    }).toString();
    const redirect = await fetch(authorize, { redirect: 'manual' });
    const code = new URL(redirect.headers.get('location')!).searchParams.get('code')!;
    const tokens = (await (
      await fetch(`${platform.authUrl}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          grant_type: 'authorization_code',
          code,
          code_verifier: verifier,
          client_id: integrator.clientId,
          client_secret: integrator.clientSecret,
        }),
      })
    ).json()) as { refresh_token: string };
    const kept: string[] = [];
    const user = new OfpClient({
      baseUrl: platform.apiUrl,
      credentials: {
        clientId: integrator.clientId,
        clientSecret: integrator.clientSecret,
        refreshToken: tokens.refresh_token,
        onRefreshToken: (refreshToken) => void kept.push(refreshToken),
      },
    });
    // Concurrent first calls share one refresh: a refresh token is good once.
    await Promise.all([user.search('items', { limit: 1 }), user.search('people', { limit: 1 })]);
    expect(kept).toHaveLength(1);
    expect(kept[0]).not.toBe(tokens.refresh_token);
  });

  it('verifies a real delivery with the endpoint secret, and refuses a tampered one', async () => {
    let secret = '';
    const receiver: WebhookReceiver = await startWebhookReceiver({ secrets: () => [secret] });
    try {
      const webhook = await ofp.create('webhooks', { url: receiver.url, events: ['item.created'] });
      secret = webhook.secret;
      await ofp.create('items', { sku: 'SDK-WEBHOOK' });
      await receiver.waitFor((received) => received.length === 1, 20_000);
      const delivery = receiver.received[0]!;
      const headers = {
        'webhook-id': delivery.id,
        'webhook-timestamp': delivery.timestamp,
        'webhook-signature': delivery.signature,
      };
      const event = verifyWebhook(delivery.body, new Headers(headers), secret);
      expect(event.type).toBe('item.created');
      if (event.type === 'item.created') expect(event.data.sku).toBe('SDK-WEBHOOK');
      expect(() =>
        ofp.verifyWebhook(delivery.body.replace('SDK-WEBHOOK', 'SDK-FORGED'), headers, secret),
      ).toThrow(WebhookVerificationError);
    } finally {
      await receiver.close();
    }
  });
});
