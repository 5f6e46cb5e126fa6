import {
  createIntegrator,
  loadContract,
  startTestPlatform,
  startWebhookReceiver,
  type Contract,
  type Integrator,
  type RunningPlatform,
  type WebhookReceiver,
} from '@ofp/testing';

interface FeedPage {
  count: number;
  results: { id: string; type: string; sequence: number; data: { id: number } }[];
  errors: Record<string, string[]> | null;
  has_more: boolean;
  next_cursor: string;
}

/**
 * `GET /v2/events` through a running platform (docs/events-feed.md): what a poller reads is what a
 * webhook subscriber receives, byte for byte; filters, scopes, organizations and bad parameters.
 */
describe('GET /v2/events through the platform', () => {
  let platform: RunningPlatform;
  let contract: Contract;
  let acme: Integrator;
  let globex: Integrator;
  let receiver: WebhookReceiver;
  let secret = '';

  beforeAll(async () => {
    contract = await loadContract();
    platform = await startTestPlatform('standalone', { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
    acme = await createIntegrator(platform, { name: 'Acme' });
    globex = await createIntegrator(platform, { name: 'Globex' });
    receiver = await startWebhookReceiver({ secrets: () => [secret] });
  }, 120_000);
  afterAll(async () => {
    await receiver?.close();
    await platform?.stop();
  }, 60_000);

  /** Every event of the feed from `cursor` on, with the cursor to go on from. */
  async function readAll(integrator: Integrator, query = '', cursor?: string) {
    const events: string[] = [];
    for (;;) {
      const after = cursor === undefined ? '' : `&starting_after=${cursor}`;
      const response = await integrator.request<FeedPage['results']>(
        'GET',
        `/v2/events?limit=2${query}${after}`,
      );
      expect(response.status).toBe(200);
      expect(
        contract.responseProblems({
          method: 'GET',
          path: '/v2/events',
          status: response.status,
          contentType: response.headers.get('content-type'),
          body: response.text,
        }),
      ).toEqual([]);
      const page = response.body as unknown as FeedPage;
      // Each event as its own JSON text, as it came.
      events.push(...page.results.map((event) => JSON.stringify(event)));
      cursor = page.next_cursor;
      if (!page.has_more) return { events, cursor };
    }
  }

  it('serves each event with the bytes its webhook delivery carries, in order, resumable from a cursor', async () => {
    const created = await acme.request('POST', '/v2/webhooks', {
      body: { url: receiver.url, events: ['person.created', 'person.updated'] },
    });
    secret = (created.body.results as { secret: string }).secret;
    const start = await readAll(acme);
    const person = await acme.request<{ id: number }>('POST', '/v2/people', {
      body: { last_name: 'Hopper' },
    });
    const id = person.body.results.id;
    await acme.request('PATCH', `/v2/people/${id}`, { body: { first_name: 'Grace' } });
    await globex.request('POST', '/v2/people', { body: { last_name: 'Other organization' } });
    await receiver.waitFor((received) => received.length === 2, 20_000);

    const { events, cursor } = await readAll(acme, '', start.cursor);
    expect(events).toEqual(receiver.received.map((delivery) => delivery.body));
    expect(events.map((event) => (JSON.parse(event) as { type: string }).type)).toEqual([
      'person.created',
      'person.updated',
    ]);
    // Nothing after the last cursor; the other organization's events are not in this feed.
    expect((await readAll(acme, '', cursor)).events).toEqual([]);
    // Its own seed (phone number types) and person, none of Acme's.
    const theirs = (await readAll(globex)).events.map((event) => JSON.parse(event) as { type: string });
    expect(theirs.map(({ type }) => type)).toEqual([
      ...Array<string>(4).fill('phone_number_type.created'),
      'person.created',
    ]);
    expect(theirs.map((event) => JSON.stringify(event))).not.toContain(events[0]);
  });

  it('filters by type and by record', async () => {
    const { body } = await acme.request<{ id: number }>('POST', '/v2/items', { body: { sku: 'FEED-1' } });
    await acme.request('PATCH', `/v2/items/${body.results.id}`, { body: { name: 'Widget' } });
    const types = (events: string[]) => events.map((event) => (JSON.parse(event) as { type: string }).type);
    expect(types((await readAll(acme, '&type=item.updated')).events)).toEqual(['item.updated']);
    expect(types((await readAll(acme, `&model=items&record_id=${body.results.id}`)).events)).toEqual([
      'item.created',
      'item.updated',
    ]);
    expect(types((await readAll(acme, '&model=items')).events)).toEqual(['item.created', 'item.updated']);
  });

  it('answers a parameter it cannot take with a 400 naming it, and needs the read scope', async () => {
    const problems = {
      'type=people.created': 'type',
      'limit=0': 'limit',
      'starting_after=abc': 'starting_after',
      'record_id=4': 'record_id',
      'model=nope': 'model',
      'offset=3': 'offset',
    };
    for (const [query, parameter] of Object.entries(problems)) {
      const response = await acme.request('GET', `/v2/events?${query}`);
      expect({ query, status: response.status, errors: Object.keys(response.body.errors ?? {}) }).toEqual({
        query,
        status: 400,
        errors: [parameter],
      });
    }
    const misspelled = await acme.request('GET', '/v2/events?type=people.created');
    expect(misspelled.body.errors?.type?.[0]).toContain('did you mean person.created?');
    const writer = await createIntegrator(platform, { name: 'Writer only', scopes: ['write'] });
    expect((await writer.request('GET', '/v2/events')).status).toBe(403);
  });
});
