import { jest } from '@jest/globals';
import { PostgresSession } from '@ofp/runtime';
import { testLogger } from '@ofp/testing';
import { eventually, startDispatcherHarness, type DispatcherHarness } from '../testing/dispatcher-harness.js';
import { SubscriberCache, type Subscriber } from './subscribers.js';

/** Long enough that within a test only a notification makes a cache look again. */
const NEVER_STALE_MS = 600_000;
const ORG = 7;

describe('the subscribers kept in memory', () => {
  let harness: DispatcherHarness;
  /** Another dispatcher process's session on the same database. */
  let otherSession: PostgresSession;

  beforeAll(async () => {
    harness = await startDispatcherHarness({ start: false });
    otherSession = new PostgresSession({
      connectionString: harness.database.url,
      applicationName: 'other-dispatcher',
      logger: testLogger('other-dispatcher'),
    });
  });
  afterAll(async () => {
    await otherSession.stop();
    await harness.close();
  });

  it('are looked up once, and again in every process after an endpoint or its subscriptions change', async () => {
    const created = await harness.createWebhook(ORG, {
      url: 'http://127.0.0.1:9/a',
      events: ['person.created'],
    });
    const caches = [
      new SubscriberCache(harness.database.pool, harness.database.session, NEVER_STALE_MS),
      new SubscriberCache(harness.database.pool, otherSession, NEVER_STALE_MS),
    ];
    for (const cache of caches) await cache.start();
    /** What every process's cache answers, once all answer `expected`. */
    const everywhere = (expected: Subscriber[], what: string) =>
      eventually(async () => {
        const seen = await Promise.all(caches.map(async (cache) => (await cache.of([ORG])).get(ORG)));
        return seen.every((each) => JSON.stringify(each) === JSON.stringify(expected)) ? true : undefined;
      }, what);
    await everywhere([{ id: created.id, events: ['person.created'] }], 'the first lookup');

    const query = jest.spyOn(harness.database.pool, 'query');
    try {
      for (const cache of caches) expect((await cache.of([ORG])).get(ORG)).toHaveLength(1);
      expect(query).not.toHaveBeenCalled();
    } finally {
      query.mockRestore();
    }

    const change = async (method: string, path: string, body?: unknown): Promise<void> => {
      const response = await harness.request(method, path, { orgId: ORG, ...(body ? { body } : {}) });
      expect(response.status).toBeLessThan(300);
    };
    await change('PATCH', `/webhooks/${created.id}`, { events: ['*'] });
    await everywhere([{ id: created.id, events: ['*'] }], 'the subscriptions changed');
    await change('PATCH', `/webhooks/${created.id}`, { enabled: false });
    await everywhere([], 'the endpoint disabled');
    const another = await harness.createWebhook(ORG, {
      url: 'http://127.0.0.1:9/b',
      events: ['item.created'],
    });
    await everywhere([{ id: another.id, events: ['item.created'] }], 'an endpoint created');
    await change('DELETE', `/webhooks/${another.id}`);
    await everywhere([], 'the endpoint deleted');
  });
});
