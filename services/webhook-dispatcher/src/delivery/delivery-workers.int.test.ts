import { randomUUID } from 'node:crypto';
import { Registry } from 'prom-client';
import { testLogger } from '@ofp/testing';
import { startDispatcherHarness, type DispatcherHarness } from '../testing/dispatcher-harness.js';
import type { AttemptRecord } from './attempt.js';
import { DeliveryMetrics } from './delivery-metrics.js';
import { DeliveryQueue, type NewDelivery } from './delivery-queue.js';
import { DeliveryWorkers } from './delivery-workers.js';
import type { OutgoingDelivery } from './http-sender.js';

/** A promise and what settles it. */
function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((settle) => (resolve = settle));
  return { promise, resolve };
}

/** The real queue, whose next completion, once its statement has committed, waits to be let go. */
class HeldQueue extends DeliveryQueue {
  private hold: { reached: () => void; released: Promise<void> } | undefined;

  /** Holds the next completion; resolves once it has committed, with what lets it go. */
  holdNext(): Promise<() => void> {
    const reached = deferred();
    const released = deferred();
    this.hold = { reached: reached.resolve, released: released.promise };
    return reached.promise.then(() => released.resolve);
  }

  override async complete(...args: Parameters<DeliveryQueue['complete']>) {
    const result = await super.complete(...args);
    const hold = this.hold;
    this.hold = undefined;
    if (hold) {
      hold.reached();
      await hold.released;
    }
    return result;
  }
}

const succeeded = (): AttemptRecord => ({
  startedAt: new Date(),
  durationMs: 1,
  statusCode: 204,
  errorKind: null,
  error: null,
  responseExcerpt: '',
  retryAfter: null,
});

describe('the delivery workers', () => {
  let harness: DispatcherHarness;
  let queue: HeldQueue;
  let webhookId: number;

  beforeAll(async () => {
    // The queue and the workers of this file: no intake, no workers of the module's.
    harness = await startDispatcherHarness({ start: false });
    queue = new HeldQueue(harness.database.pool, harness.secrets);
    webhookId = (await harness.createWebhook(1, { url: 'http://127.0.0.1:9/hooks', events: ['*'] })).id;
  });
  afterAll(async () => {
    await harness.close();
  });

  const delivery = (streamId: string): NewDelivery => ({
    orgId: 1,
    webhookId,
    eventId: randomUUID(),
    eventType: 'person.updated',
    streamId,
    sequence: 1,
    payload: '{}',
  });

  it('records an attempt that finishes as the recording before it ends, without waiting for another', async () => {
    // Where the second attempt finishes, in microtasks after the first one's recording committed: the
    // steps from there to the end of the recording loop are a few; each place is tried. No clock.
    const unrecorded: number[] = [];
    for (let hops = 0; hops <= 8; hops++) {
      const [first, second] = [delivery('a'), delivery('b')];
      await queue.enqueue([first, second], new Date());
      /** What finishes each attempt under way, by event id. */
      const sending = new Map<string, (attempt: AttemptRecord) => void>();
      const bothSent = deferred();
      const sender = {
        deliver(outgoing: OutgoingDelivery): Promise<AttemptRecord> {
          const { promise, resolve } = deferred<AttemptRecord>();
          sending.set(outgoing.eventId, resolve);
          if (sending.size === 2) bothSent.resolve();
          return promise;
        },
      };
      const workers = new DeliveryWorkers({
        session: harness.database.session,
        queue,
        sender,
        metrics: new DeliveryMetrics(new Registry(), () => queue.depth(new Date())),
        onDisableRequested: () => {},
        onGivenUp: () => {},
        clock: () => new Date(),
        random: () => 0.5,
        logger: testLogger('webhook-workers'),
        limits: {
          concurrency: 2,
          claimAhead: 0,
          endpointConcurrency: 2,
          pollIntervalMs: 50,
          leaseMs: 60_000,
          reapIntervalMs: 60_000,
        },
      });
      await workers.start();
      await bothSent.promise;
      const held = queue.holdNext();
      sending.get(first.eventId)!(succeeded());
      const release = await held;
      release();
      for (let hop = 0; hop < hops; hop++) await Promise.resolve();
      sending.get(second.eventId)!(succeeded());
      // Stopping waits for the recordings under way, not for attempts that nothing records.
      await workers.stop();
      const { rows } = await harness.database.pool.query<{ status: string }>(
        'SELECT status FROM webhooks.webhook_deliveries WHERE event_id = $1',
        [second.eventId],
      );
      if (rows[0]?.status !== 'succeeded') unrecorded.push(hops);
      await harness.database.pool.query('DELETE FROM webhooks.delivery_queue');
    }
    expect(unrecorded).toEqual([]);
  });
});
