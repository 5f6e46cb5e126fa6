// @runs-alone: counts deliveries within windows of a few seconds against an endpoint's rate
import { randomUUID } from 'node:crypto';
import { createPool } from '@ofp/runtime';
import { startDispatcherHarness, type DispatcherHarness } from '../testing/dispatcher-harness.js';
import {
  DELIVERIES_CHANNEL,
  DeliveryQueue,
  type ClaimedDelivery,
  type ClaimOptions,
  type FinishedAttempt,
  type NewDelivery,
} from './delivery-queue.js';
import type { AttemptVerdict } from './retry-schedule.js';

const NOW = new Date('2026-11-21T07:30:00.000Z');
const CLAIM = { worker: 11, limit: 100, endpointConcurrency: 100, leaseMs: 60_000 };

describe('the delivery queue', () => {
  let harness: DispatcherHarness;
  let queue: DeliveryQueue;
  let webhookId: number;

  beforeAll(async () => {
    // The queue alone: no intake, no workers.
    harness = await startDispatcherHarness({ start: false });
    queue = new DeliveryQueue(harness.database.pool, harness.secrets);
    webhookId = (await harness.createWebhook(1, { url: 'http://127.0.0.1:9/hooks', events: ['*'] })).id;
  });
  afterAll(async () => {
    await harness.close();
  });
  afterEach(async () => {
    await harness.database.pool.query(
      `DELETE FROM webhooks.delivery_queue; DELETE FROM webhooks.webhook_deliveries__attempt_log;
       DELETE FROM webhooks.webhook_deliveries`,
    );
  });

  /** The deliveries a claim took. */
  const claim = async (options: ClaimOptions, at: Date): Promise<ClaimedDelivery[]> =>
    (await queue.claim(options, at)).deliveries;
  const delivery = (streamId: string | null, sequence: number | null): NewDelivery => ({
    orgId: 1,
    webhookId,
    eventId: randomUUID(),
    eventType: 'person.updated',
    streamId,
    sequence,
    payload: '{}',
  });
  const finished = (d: ClaimedDelivery, statusCode: number, verdict: AttemptVerdict): FinishedAttempt => ({
    delivery: d,
    attempt: {
      startedAt: NOW,
      durationMs: 1,
      statusCode,
      errorKind: statusCode < 300 ? null : 'http_status',
      error: statusCode < 300 ? null : `HTTP ${statusCode}`,
      responseExcerpt: '',
      retryAfter: null,
    },
    verdict,
  });
  const complete = (attempts: readonly FinishedAttempt[]) =>
    queue.complete(attempts, NOW, 5 * 24 * 3_600_000);
  const record = (claimed: readonly ClaimedDelivery[], statusCode: number, verdict: AttemptVerdict) =>
    complete(claimed.map((d) => finished(d, statusCode, verdict)));
  const succeed = (claimed: readonly ClaimedDelivery[]) => record(claimed, 204, { status: 'succeeded' });
  /** Whether each queued (unclaimed) delivery has its record's turn, by `<stream>@<sequence>`. */
  const heads = async (): Promise<Record<string, boolean>> => {
    const { rows } = await harness.database.pool.query<{ key: string; head: boolean }>(
      `SELECT stream_id || '@' || sequence AS key, due_at IS NOT NULL AS head
         FROM webhooks.delivery_queue WHERE claimed_by IS NULL`,
    );
    return Object.fromEntries(rows.map((row) => [row.key, row.head]));
  };

  it('purges deliveries finished before the cut-off, attempts and counts with them, in batches', async () => {
    const pool = harness.database.pool;
    const counted = async (): Promise<number> =>
      Number(
        (
          await pool.query<{ count: string }>(
            "SELECT count FROM webhooks.record_counts WHERE model = 'webhook_deliveries' AND org_id = 1",
          )
        ).rows[0]!.count,
      );
    await queue.enqueue([delivery('p1', 1), delivery('p2', 1), delivery('p3', 1), delivery('p4', 1)], NOW);
    const claimed = await claim(CLAIM, NOW);
    expect(claimed).toHaveLength(4);
    await succeed(claimed.slice(0, 3));
    const before = await counted();

    expect(await queue.purgeFinished(NOW, 10)).toBe(0);
    const later = new Date(NOW.getTime() + 1);
    expect(await queue.purgeFinished(later, 2)).toBe(2);
    expect(await queue.purgeFinished(later, 2)).toBe(1);
    expect(await queue.purgeFinished(later, 2)).toBe(0);
    expect(await counted()).toBe(before - 3);
    const { rows } = await pool.query<{ status: string; attempts: number }>(
      `SELECT d.status, (SELECT count(*)::int FROM webhooks.webhook_deliveries__attempt_log) AS attempts
         FROM webhooks.webhook_deliveries d`,
    );
    // The one on the wire stays, pending until its attempt is recorded.
    expect(rows).toEqual([{ status: 'pending', attempts: 0 }]);
  });

  it("wakes every process's workers when it queues a due delivery, not one that waits its turn", async () => {
    const listener = await harness.database.pool.connect();
    let notified = 0;
    const count = (): void => {
      notified++;
    };
    listener.on('notification', count);
    await listener.query(`LISTEN ${DELIVERIES_CHANNEL}`);
    /** Notifications received in the next 200 ms (they come when the queueing commits). */
    const received = async (): Promise<number> => {
      await new Promise((resolve) => setTimeout(resolve, 200));
      return notified;
    };
    try {
      await queue.enqueue([delivery('people-wake', 1)], NOW);
      expect(await received()).toBe(1);
      // Behind the first, still open: not due, nothing to claim.
      await queue.enqueue([delivery('people-wake', 2)], NOW);
      expect(await received()).toBe(1);
    } finally {
      listener.off('notification', count);
      await listener.query(`UNLISTEN ${DELIVERIES_CHANNEL}`);
      listener.release();
    }
  });

  /** A claimed delivery to an endpoint of its own, which the test then disables. */
  const claimedAtOwnEndpoint = async (path: string) => {
    const { id } = await harness.createWebhook(1, { url: `http://127.0.0.1:9/${path}`, events: ['*'] });
    await queue.enqueue([{ ...delivery(`people-${path}`, 1), webhookId: id }], NOW);
    return { webhookId: id, claimed: await claim(CLAIM, NOW) };
  };
  /**
   * Runs `racing` while a disable of the endpoint is under way (changed, its queue given up, not
   * committed): it must wait for the disable, which commits after 200 ms. Then the endpoint's deliveries.
   */
  const whileDisabling = async (webhookId: number, racing: () => Promise<unknown>) => {
    const pool = harness.database.pool;
    const disabling = await pool.connect();
    try {
      await disabling.query('BEGIN');
      await disabling.query('UPDATE webhooks.webhooks SET enabled = false WHERE id = $1', [webhookId]);
      await queue.abandon(disabling, webhookId, 'endpoint disabled', NOW);
      let settled = false;
      const raced = racing().finally(() => {
        settled = true;
      });
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(settled).toBe(false);
      await disabling.query('COMMIT');
      const outcome = await raced;
      const { rows } = await pool.query<{ status: string; next_attempt_at: Date | null }>(
        'SELECT status, next_attempt_at FROM webhooks.webhook_deliveries WHERE webhook_id = $1',
        [webhookId],
      );
      return { outcome, deliveries: rows };
    } finally {
      disabling.release();
    }
  };

  it('gives up the retry of an attempt recorded while its endpoint is being disabled', async () => {
    const { webhookId, claimed } = await claimedAtOwnEndpoint('recorded');
    const { deliveries } = await whileDisabling(webhookId, () =>
      record(claimed, 500, { status: 'pending', nextAttemptAt: new Date(NOW.getTime() + 5_000) }),
    );
    expect(deliveries).toEqual([{ status: 'failed', next_attempt_at: null }]);
  });

  it('queues nothing again for an endpoint being disabled', async () => {
    const { webhookId, claimed } = await claimedAtOwnEndpoint('requeued');
    await record(claimed, 500, { status: 'failed', disableEndpoint: false });
    const { outcome, deliveries } = await whileDisabling(webhookId, () =>
      Promise.all([
        queue.retry(1, claimed[0]!.id, NOW),
        queue.recover(1, webhookId, new Date(NOW.getTime() - 60_000), NOW),
      ]),
    );
    expect(outcome).toEqual([false, 0]);
    expect(deliveries).toEqual([{ status: 'failed', next_attempt_at: null }]);
  });

  it('queues one delivery per endpoint and event, however often the event comes', async () => {
    const once = delivery('people-1', 1);
    expect(await queue.enqueue([once], NOW)).toHaveLength(1);
    expect(await queue.enqueue([once, once], NOW)).toEqual([]);
  });

  it('gives a record’s turn to its first delivery, and passes it on when that one finishes', async () => {
    await queue.enqueue([delivery('people-1', 1), delivery('people-1', 2)], NOW);
    await queue.enqueue([delivery('people-1', 3), delivery('people-2', 1)], NOW);
    expect(await heads()).toEqual({
      'people-1@1': true,
      'people-1@2': false,
      'people-1@3': false,
      'people-2@1': true,
    });
    const first = await claim(CLAIM, NOW);
    expect(first.map((d) => d.streamId).sort()).toEqual(['people-1', 'people-2']);
    await succeed(first);
    expect(await heads()).toEqual({ 'people-1@2': true, 'people-1@3': false });
    const second = await claim(CLAIM, NOW);
    expect(second).toHaveLength(1);
    await succeed(second);
    expect(await heads()).toEqual({ 'people-1@3': true });
  });

  it('never claims a later delivery of a record while an earlier one is open, one queued again included', async () => {
    const fail = (claimed: readonly ClaimedDelivery[]) =>
      record(claimed, 500, { status: 'failed', disableEndpoint: false });
    const [first, second] = [delivery('people-5', 1), delivery('people-5', 2)];
    await queue.enqueue([first, second], NOW);
    const firstClaim = await claim(CLAIM, NOW);
    expect(firstClaim.map((d) => d.eventId)).toEqual([first.eventId]);
    expect(await claim(CLAIM, NOW)).toEqual([]);
    await fail(firstClaim);
    const secondClaim = await claim(CLAIM, NOW);
    expect(secondClaim.map((d) => d.eventId)).toEqual([second.eventId]);
    await fail(secondClaim);
    // Both given up, then sent again, the later one first: it waits again for the earlier one.
    expect(await queue.retry(1, secondClaim[0]!.id, NOW)).toBe(true);
    expect(await queue.retry(1, firstClaim[0]!.id, NOW)).toBe(true);
    const again = await claim(CLAIM, NOW);
    expect(again.map((d) => d.eventId)).toEqual([first.eventId]);
    expect(await claim(CLAIM, NOW)).toEqual([]);
    await succeed(again);
    expect((await claim(CLAIM, NOW)).map((d) => d.eventId)).toEqual([second.eventId]);
  });

  it('sweeps up a turn that a process which died before passing it left behind', async () => {
    await queue.enqueue([delivery('people-7', 1), delivery('people-7', 2)], NOW);
    // The first one finished, but its turn was never passed.
    await harness.database.pool.query(
      `WITH finished AS (
         UPDATE webhooks.webhook_deliveries SET status = 'succeeded' WHERE stream_id = 'people-7' AND sequence = 1
         RETURNING id
       )
       DELETE FROM webhooks.delivery_queue WHERE delivery_id IN (SELECT id FROM finished)`,
    );
    expect(await claim(CLAIM, NOW)).toEqual([]);
    expect(await queue.passTurns(NOW)).toBe(1);
    expect(await claim(CLAIM, NOW)).toHaveLength(1);
  });

  it('claims no more of an endpoint’s deliveries than its limit, counting those in flight', async () => {
    await queue.enqueue(
      Array.from({ length: 10 }, (_, n) => delivery(`items-${n}`, 1)),
      NOW,
    );
    expect(await claim({ ...CLAIM, endpointConcurrency: 3 }, NOW)).toHaveLength(3);
    expect(await claim({ ...CLAIM, endpointConcurrency: 3 }, NOW)).toEqual([]);
    expect(await claim({ ...CLAIM, endpointConcurrency: 5 }, NOW)).toHaveLength(2);
  });

  it('claims with heap-only updates: a claim writes no index entry', async () => {
    // One connection, whose table counts are flushed on demand (pg_stat_force_next_flush).
    const pool = createPool({ connectionString: harness.database.url, applicationName: 'test', max: 1 });
    try {
      const counts = async (): Promise<{ updated: number; hot: number }> => {
        await pool.query('SELECT pg_stat_force_next_flush()');
        const { rows } = await pool.query<{ updated: string; hot: string }>(
          `SELECT n_tup_upd AS updated, n_tup_hot_upd AS hot FROM pg_stat_user_tables
            WHERE schemaname = 'webhooks' AND relname = 'delivery_queue'`,
        );
        return { updated: Number(rows[0]!.updated), hot: Number(rows[0]!.hot) };
      };
      await queue.enqueue(
        Array.from({ length: 10 }, (_, n) => delivery(`items-${n}`, 1)),
        NOW,
      );
      const before = await counts();
      expect(await new DeliveryQueue(pool, harness.secrets).claim(CLAIM, NOW)).toMatchObject({
        deliveries: expect.arrayContaining([expect.anything()]) as unknown,
      });
      const after = await counts();
      expect({ updated: after.updated - before.updated, hot: after.hot - before.hot }).toEqual({
        updated: 10,
        hot: 10,
      });
    } finally {
      await pool.end();
    }
  });

  it('holds no endpoint behind another whose slots are taken, however long its backlog', async () => {
    const { id: slow } = await harness.createWebhook(1, { url: 'http://127.0.0.1:9/slow', events: ['*'] });
    // Older than anything of the other endpoint, and more than a claim looks at.
    await queue.enqueue(
      Array.from({ length: 5 * CLAIM.limit }, (_, n) => ({ ...delivery(`slow-${n}`, 1), webhookId: slow })),
      NOW,
    );
    const capped = { ...CLAIM, endpointConcurrency: 2 };
    const first = await claim(capped, NOW);
    expect(first.map((d) => d.webhookId)).toEqual([slow, slow]);
    const later = new Date(NOW.getTime() + 1_000);
    await queue.enqueue([delivery('fast-1', 1), delivery('fast-2', 1)], later);
    const second = await claim(capped, later);
    expect(second.map((d) => d.webhookId)).toEqual([webhookId, webhookId]);
    // A slot of each free again: the slow endpoint's oldest first, then the other's.
    await succeed([first[0]!, ...second]);
    await queue.enqueue([delivery('fast-3', 1)], later);
    const third = await claim(capped, later);
    expect(third.map((d) => d.webhookId)).toEqual([slow, webhookId]);
    expect(third[0]!.streamId).toBe('slow-2');
  });

  it('queues again what a worker that is gone had claimed, and what it hands back', async () => {
    await queue.enqueue([delivery(null, null), delivery(null, null)], NOW);
    const [kept, handedBack] = await claim(CLAIM, NOW);
    expect(await queue.claimHolders(99)).toEqual([CLAIM.worker]);
    expect(await queue.release({ worker: CLAIM.worker, ids: [handedBack!.id] }, NOW)).toBe(1);
    expect(await queue.release({ worker: CLAIM.worker }, NOW)).toBe(1);
    expect((await claim(CLAIM, NOW)).map((d) => d.id).sort()).toEqual([kept!.id, handedBack!.id].sort());
    // Claims that lapse are due again, for any worker.
    const lapsed = new Date(NOW.getTime() + CLAIM.leaseMs + 1);
    expect(await claim({ ...CLAIM, worker: 12 }, new Date(lapsed.getTime() - 2))).toEqual([]);
    expect(await claim({ ...CLAIM, worker: 12 }, lapsed)).toHaveLength(2);
  });

  it('records only the attempt of the claim that holds when a batch has a delivery twice', async () => {
    await queue.enqueue([delivery('people-9', 1)], NOW);
    const [old] = await claim(CLAIM, NOW);
    // The worker's session was lost: it took a new key, and its old claims were queued again and
    // claimed under the new one while the first attempt still waited to be recorded.
    expect(await queue.release({ worker: CLAIM.worker }, NOW)).toBe(1);
    const [renewed] = await claim({ ...CLAIM, worker: 12 }, NOW);
    expect(renewed!.id).toBe(old!.id);
    const retryAt = new Date(NOW.getTime() + 60_000);
    await complete([
      finished(old!, 503, { status: 'pending', nextAttemptAt: retryAt }),
      finished(renewed!, 204, { status: 'succeeded' }),
      finished(renewed!, 204, { status: 'succeeded' }),
    ]);
    const { rows } = await harness.database.pool.query<{
      status: string;
      attempts: number;
      logged: string[];
    }>(
      `SELECT d.status, d.attempts,
              array(SELECT l.status_code::text FROM webhooks.webhook_deliveries__attempt_log l WHERE l.record_id = d.id) AS logged
         FROM webhooks.webhook_deliveries d WHERE d.id = $1`,
      [old!.id],
    );
    expect(rows).toEqual([{ status: 'succeeded', attempts: 1, logged: ['204'] }]);
    expect(await claim(CLAIM, retryAt)).toEqual([]);
  });

  describe('with an endpoint rate (rate_limit)', () => {
    /** A new endpoint with `rate_limit` (deliveries per second) and `n` due deliveries of its own records. */
    const ratedEndpoint = async (rate: number | null, n: number, versions = 1) => {
      const { id } = await harness.createWebhook(1, {
        url: 'http://127.0.0.1:9/rated',
        events: ['*'],
        rate_limit: rate,
      });
      await queue.enqueue(
        Array.from({ length: n * versions }, (_, k) => ({
          ...delivery(`rated-${id}-${Math.floor(k / versions)}`, (k % versions) + 1),
          webhookId: id,
        })),
        NOW,
      );
      return id;
    };
    const at = (ms: number): Date => new Date(NOW.getTime() + ms);
    const setRate = async (id: number, rate: number | null) => {
      const response = await harness.request('PATCH', `/webhooks/${id}`, { body: { rate_limit: rate } });
      expect(response.status).toBe(200);
    };

    it('claims no faster than the rate across workers, holding back the rest until their tokens come', async () => {
      await ratedEndpoint(10, 60);
      // Two workers (as two processes would) claiming every 10 ms for 3 s: they share one bucket.
      const first = await queue.claim({ ...CLAIM, worker: 21 }, NOW);
      expect(first.deliveries).toHaveLength(1);
      expect(first.heldBack).toBe(59);
      expect(first.nextTokenAt).toEqual(at(100));
      let claimed = 1;
      for (let ms = 10; ms <= 3_000; ms += 10) {
        const taken = await queue.claim({ ...CLAIM, worker: ms % 20 === 0 ? 21 : 22 }, at(ms));
        // A bucket of one token at 10/s: never two within 100 ms.
        expect(taken.deliveries.length).toBeLessThanOrEqual(1);
        claimed += taken.deliveries.length;
      }
      // 10 per second: one at once, then one every 100 ms.
      expect(claimed).toBe(31);
    });

    it('keeps each record’s order under the rate', async () => {
      const id = await ratedEndpoint(20, 3, 4);
      const sent: string[] = [];
      for (let ms = 0; sent.length < 12 && ms <= 5_000; ms += 25) {
        const { deliveries } = await queue.claim(CLAIM, at(ms));
        for (const d of deliveries) {
          const { rows } = await harness.database.pool.query<{ sequence: number }>(
            'SELECT sequence FROM webhooks.webhook_deliveries WHERE id = $1',
            [d.id],
          );
          sent.push(`${d.streamId}@${rows[0]!.sequence}`);
        }
        await succeed(deliveries);
      }
      expect(sent).toHaveLength(12);
      for (const stream of [0, 1, 2].map((n) => `rated-${id}-${n}`)) {
        expect(sent.filter((s) => s.startsWith(`${stream}@`))).toEqual(
          [1, 2, 3, 4].map((v) => `${stream}@${v}`),
        );
      }
    });

    it('takes a raised or removed rate at the next claim, what the old one put off included', async () => {
      const id = await ratedEndpoint(1, 150);
      let sent = 0;
      const within = async (from: number, to: number): Promise<number> => {
        let claimed = 0;
        for (let ms = from; ms < to; ms += 50) {
          const { deliveries } = await queue.claim(CLAIM, at(ms));
          await succeed(deliveries);
          claimed += deliveries.length;
        }
        sent += claimed;
        return claimed;
      };
      expect(await within(0, 2_000)).toBe(2);
      await setRate(id, 20);
      // 20 per second for 2 s (the bucket: two at once).
      expect(await within(2_000, 4_000)).toBeGreaterThanOrEqual(39);
      expect(await within(4_000, 6_000)).toBeLessThanOrEqual(41);
      await setRate(id, null);
      // No rate: everything left (what the rate had put off included) in the next claim.
      expect(150 - sent).toBeLessThanOrEqual(CLAIM.limit);
      expect((await queue.claim(CLAIM, at(6_000))).deliveries).toHaveLength(150 - sent);
    });

    it('does not hold other endpoints behind a backlog that its rate holds back', async () => {
      const rated = await ratedEndpoint(1, 3 * CLAIM.limit);
      const { id: other } = await harness.createWebhook(1, {
        url: 'http://127.0.0.1:9/other',
        events: ['*'],
      });
      await queue.enqueue([{ ...delivery('other-1', 1), webhookId: other }], at(1));
      // The rated endpoint's one token, the rest of what the claim looked at put off, and beside them
      // the other endpoint's delivery.
      const first = await queue.claim(CLAIM, at(1));
      expect(first.deliveries.map((d) => d.webhookId)).toEqual([rated, other]);
      expect(first.heldBack).toBe(2 * CLAIM.limit - 1);
    });
  });
});
