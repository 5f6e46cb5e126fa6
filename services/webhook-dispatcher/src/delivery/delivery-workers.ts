import { randomInt } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { retryDelay, Wakeup } from '@ofp/bus';
import { isDependencyDown, type Logger, type PostgresSession, type SessionLock } from '@ofp/runtime';
import type { AttemptRecord } from './attempt.js';
import type { DeliveryMetrics } from './delivery-metrics.js';
import {
  DELIVERIES_CHANNEL,
  type ClaimedDelivery,
  type DeliveryQueue,
  type FinishedAttempt,
} from './delivery-queue.js';
import type { HttpSender } from './http-sender.js';
import { FAILING_PERIOD_MS, judgeAttempt } from './retry-schedule.js';
import { RunsInTurn } from './runs-in-turn.js';

/**
 * The advisory lock space of worker liveness: each worker process holds the lock `(space, its key)` on
 * its session for as long as it lives, and marks what it claims with its key. A claim whose key nobody
 * holds belongs to a process that died (or whose session was lost), and is queued again at once.
 */
const WORKER_LOCK_SPACE = 'ofp:webhook-workers';

/**
 * How often to pass the turns that a process which died between a commit and passing them left
 * behind (see `DeliveryQueue.passTurns`); also done at start. It reads every waiting delivery.
 */
const TURN_SWEEP_MS = 30_000;

/**
 * Whether a recording's error may not happen again: the database could not answer then (a lost
 * connection, a shutdown, a timeout, a deadlock: {@link isDependencyDown}), or lacked resources (SQLSTATE
 * class 53: disk full, out of memory) or met a system error (class 58: I/O). Anything else (a constraint
 * violated, a data exception, a bug) the same statement meets again.
 */
function isTransient(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return isDependencyDown(error) || (typeof code === 'string' && /^(53|58)/.test(code));
}

/** Most attempts recorded in one statement. */
const MAX_RECORDED_AT_ONCE = 500;

export interface WorkerLimits {
  /** Deliveries in flight at once in this process: the worker pool. */
  readonly concurrency: number;
  /**
   * Deliveries claimed ahead of room in the pool, so that sending never waits for a claim. They count
   * against the endpoint's limit like those in flight.
   */
  readonly claimAhead: number;
  /** Deliveries of one endpoint claimed (in flight, or about to be) at once, across all processes. */
  readonly endpointConcurrency: number;
  /** How often to look for due deliveries without a notification (retries fall due by the clock). */
  readonly pollIntervalMs: number;
  /** How long a claim holds should its worker hang without dying; far longer than any request. */
  readonly leaseMs: number;
  /** How often to look for deliveries held by workers that are gone. */
  readonly reapIntervalMs: number;
}

export interface DeliveryWorkersDependencies {
  /** The process's session: the liveness lock, and the notifications of due deliveries. */
  readonly session: PostgresSession;
  readonly queue: DeliveryQueue;
  /** Sends an attempt; never throws (every outcome is an attempt record). */
  readonly sender: Pick<HttpSender, 'deliver'>;
  readonly metrics: DeliveryMetrics;
  /** Asked to run when a recorded attempt demands that an endpoint be disabled. */
  readonly onDisableRequested: () => void;
  /** Asked to run when recorded attempts gave deliveries up (webhook.delivery_failed to tell). */
  readonly onGivenUp: () => void;
  readonly clock: () => Date;
  readonly random: () => number;
  readonly logger: Logger;
  readonly limits: WorkerLimits;
}

/**
 * The worker pool: claims due deliveries from the queue, sends them signed, and records each attempt
 * and its verdict. Attempts finished while a recording is under way are recorded together with the
 * next one (group commit), which keeps the queue's write load per delivery small.
 *
 * At least once: a delivery is marked `sending` before its request and recorded after it; a process
 * that dies in between leaves it `sending` under a key nobody holds any more, and the next reaping
 * (at every start, then periodically, in any process) queues it again with the same `webhook-id`.
 */
export class DeliveryWorkers {
  private readonly wakeup = new Wakeup();
  private readonly inFlight = new Set<Promise<void>>();
  /** Claimed deliveries waiting for room in the pool. */
  private readonly ready: ClaimedDelivery[] = [];
  private readonly finished: FinishedAttempt[] = [];
  /**
   * Whether the loop last found no room to claim (the pool and the deliveries claimed ahead full): only
   * then does a delivery that finishes wake it. Otherwise a finished delivery makes nothing due (its
   * recording does, and wakes it), and waking the loop at each one ran a claim per delivery finished,
   * which the claims of newly queued deliveries then waited behind.
   */
  private waitingForRoom = false;
  /** The recording of finished attempts: one at a time (group commit). */
  private readonly recordings = new RunsInTurn(() => this.recordFinished());
  private liveness: { readonly lock: SessionLock; readonly key: number } | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private running = false;
  private loop: Promise<void> | undefined;
  private reaper: NodeJS.Timeout | undefined;

  constructor(private readonly deps: DeliveryWorkersDependencies) {}

  async start(): Promise<void> {
    const wake = (): void => this.wakeup.notify();
    this.unlisten = await this.deps.session.listen(DELIVERIES_CHANNEL, { notify: wake, resumed: wake });
    if (!(await this.live())) throw new Error('the Postgres session is not connected');
    await this.reap();
    this.running = true;
    this.loop = this.run();
    this.reaper = setInterval(() => {
      this.reap().catch((error: unknown) => this.deps.logger.error({ err: error }, 'reaping claims failed'));
    }, this.deps.limits.reapIntervalMs);
    this.reaper.unref();
  }

  /**
   * Stops claiming, hands back what was claimed but not sent, lets the requests in flight finish
   * (bounded by the request timeout) and records them.
   */
  async stop(): Promise<void> {
    this.running = false;
    clearInterval(this.reaper);
    this.wakeup.notify();
    await this.loop;
    const unsent = this.ready.splice(0);
    if (this.liveness && unsent.length > 0) {
      await this.deps.queue
        .release({ worker: this.liveness.key, ids: unsent.map((d) => d.id) }, this.deps.clock())
        .catch((error: unknown) =>
          this.deps.logger.warn({ err: error }, 'handing back claims failed; reaping will'),
        );
    }
    await Promise.allSettled([...this.inFlight]);
    await this.recordings.idle();
    const lock = this.liveness?.lock;
    this.liveness = undefined;
    await lock?.release();
    await this.unlisten?.();
  }

  private async run(): Promise<void> {
    const { concurrency, claimAhead } = this.deps.limits;
    let failures = 0;
    let swept = Number.NEGATIVE_INFINITY;
    while (this.running) {
      try {
        const liveness = await this.live();
        if (!liveness) {
          // Nothing is claimed without a liveness lock; the session wakes the loop once it is back.
          await this.wakeup.wait(this.deps.limits.pollIntervalMs);
          continue;
        }
        if (performance.now() - swept >= TURN_SWEEP_MS) {
          await this.deps.queue.passTurns(this.deps.clock());
          swept = performance.now();
        }
        const room = concurrency + claimAhead - this.inFlight.size - this.ready.length;
        // Claims come in batches, when the deliveries ready to go run low, not one per freed slot.
        this.waitingForRoom = room <= 0 || this.ready.length > claimAhead / 2;
        if (!this.waitingForRoom) {
          const now = this.deps.clock();
          const { deliveries, heldBack, nextTokenAt } = await this.deps.queue.claim(
            {
              worker: liveness.key,
              limit: room,
              endpointConcurrency: this.deps.limits.endpointConcurrency,
              leaseMs: this.deps.limits.leaseMs,
            },
            now,
          );
          this.ready.push(...deliveries);
          this.sendReady();
          this.deps.metrics.heldBackByRate(heldBack);
          failures = 0;
          // A full claim may have left more due, and deliveries a rate held back may have hidden
          // others behind them: look again at once.
          if (deliveries.length === room || heldBack > 0) continue;
          // An endpoint whose rate the claim spent has more to send once its next token comes.
          if (nextTokenAt !== undefined) {
            const untilToken = nextTokenAt.getTime() - now.getTime();
            await this.wakeup.wait(Math.min(Math.max(untilToken, 1), this.deps.limits.pollIntervalMs));
            continue;
          }
        }
        await this.wakeup.wait(this.deps.limits.pollIntervalMs);
      } catch (error) {
        failures++;
        this.deps.logger.error({ err: error, failures }, 'claiming webhook deliveries failed; retrying');
        await this.wakeup.wait(retryDelay(failures));
      }
    }
  }

  /** Starts claimed deliveries while the pool has room. */
  private sendReady(): void {
    while (this.inFlight.size < this.deps.limits.concurrency) {
      const delivery = this.ready.shift();
      if (!delivery) return;
      const sending = this.deliver(delivery)
        .catch((error: unknown) => {
          // Not expected (a send never throws); the claim lapses after leaseMs and the delivery goes again.
          this.deps.logger.error(
            { err: error, event_id: delivery.eventId },
            'webhook delivery failed unexpectedly',
          );
        })
        .finally(() => {
          this.inFlight.delete(sending);
          if (this.running) this.sendReady();
          if (this.waitingForRoom && this.ready.length <= this.deps.limits.claimAhead / 2)
            this.wakeup.notify();
        });
      this.inFlight.add(sending);
    }
  }

  private async deliver(delivery: ClaimedDelivery): Promise<void> {
    const { secrets } = delivery;
    let attempt: AttemptRecord;
    if ('unopened' in secrets) {
      // Nothing can be signed: an attempt that failed without a request, retried on the schedule (the
      // key may be put back), and counted, for the operator (the chart's OfpWebhookSecretsUnopened).
      this.deps.metrics.secretUnopened();
      attempt = {
        startedAt: this.deps.clock(),
        durationMs: 0,
        statusCode: null,
        errorKind: 'secret',
        error: `not sent: the endpoint's signing secret does not open with SECRETS_KEY_FILE (${secrets.unopened})`,
        responseExcerpt: null,
        retryAfter: null,
      };
    } else attempt = await this.deps.sender.deliver({ ...delivery, secrets });
    const number = delivery.roundAttempts + 1;
    const verdict = judgeAttempt(attempt, number, this.deps.clock(), this.deps.random);
    this.deps.metrics.observe(verdict, attempt.durationMs);
    if (verdict.status !== 'succeeded') {
      this.deps.logger.warn(
        {
          event_id: delivery.eventId,
          event_type: delivery.eventType,
          delivery_id: delivery.id,
          webhook_id: delivery.webhookId,
          attempt: number,
          status_code: attempt.statusCode,
          error_kind: attempt.errorKind,
          error: attempt.error,
          verdict: verdict.status,
          ...(verdict.status === 'pending' ? { next_attempt_at: verdict.nextAttemptAt.toISOString() } : {}),
        },
        'webhook delivery attempt failed',
      );
    }
    this.finished.push({ delivery, attempt, verdict });
    this.recordings.request();
  }

  /**
   * Records what finished, one statement at a time, until nothing is left; what finishes meanwhile goes
   * in the next statement. Run by {@link recordings}, which runs it again for an attempt that finished
   * as it ended.
   */
  private async recordFinished(): Promise<void> {
    let failures = 0;
    while (this.finished.length > 0) {
      const batch = this.finished.splice(0, MAX_RECORDED_AT_ONCE);
      try {
        await this.recordSplitting(batch);
        failures = 0;
      } catch (error) {
        failures++;
        this.deps.logger.error({ err: error, failures }, 'recording webhook attempts failed; retrying');
        // Stopping with the database away: the claims stay ours until reaped, then are sent again.
        if (!this.running) return;
        // Those of the batch already recorded (a half of a split) are not recorded twice: their claim
        // is gone, and a completion records only attempts whose claim holds.
        this.finished.unshift(...batch);
        await new Promise((resolve) => setTimeout(resolve, retryDelay(failures)));
      }
    }
    // What a recording makes due (turns passed, endpoint slots freed) wakes the loop through the
    // notification its statement sends, which every process's workers hear, this one's included: a
    // second wake-up from here ran a second claim after each recording, most of them finding nothing.
  }

  /**
   * Records a batch of attempts. A transient failure is thrown, for the whole batch to be tried again.
   * On one that will not change (a constraint an attempt violates, a bug), trying again would hold
   * every attempt behind it for ever: the batch is split in halves, each recorded apart, down to the
   * attempt that fails, which is left unrecorded. Its claim lapses after `leaseMs` and its delivery is
   * sent again (at least once), so it costs one try per lease, not a loop.
   */
  private async recordSplitting(batch: readonly FinishedAttempt[]): Promise<void> {
    try {
      const { toDisable, givenUp } = await this.deps.queue.complete(
        batch,
        this.deps.clock(),
        FAILING_PERIOD_MS,
      );
      if (toDisable.length > 0) this.deps.onDisableRequested();
      if (givenUp > 0) this.deps.onGivenUp();
    } catch (error) {
      const transient = isTransient(error);
      this.deps.metrics.recordingFailed(transient ? 'transient' : 'permanent');
      if (transient) throw error;
      const [only] = batch;
      if (batch.length === 1 && only) {
        this.deps.logger.error(
          {
            err: error,
            delivery_id: only.delivery.id,
            event_id: only.delivery.eventId,
            webhook_id: only.delivery.webhookId,
          },
          'recording a webhook attempt failed with an error that will not change; left unrecorded, it is sent again once its claim lapses',
        );
        return;
      }
      const half = Math.ceil(batch.length / 2);
      await this.recordSplitting(batch.slice(0, half));
      await this.recordSplitting(batch.slice(half));
    }
  }

  /**
   * The liveness lock this process claims under: the one it holds, or, after its session was lost
   * (the lock with it: others may already have queued its claims again), a new key of its own;
   * undefined while the session is not connected.
   */
  private async live(): Promise<{ lock: SessionLock; key: number } | undefined> {
    if (this.liveness?.lock.held()) return this.liveness;
    if (this.liveness) {
      this.deps.logger.warn(
        { worker: this.liveness.key },
        'webhook worker liveness lock lost; taking a new one',
      );
      this.liveness = undefined;
    }
    for (;;) {
      if (!this.deps.session.connected()) return undefined;
      const key = randomInt(1, 2 ** 31 - 1);
      const lock = this.deps.session.lock([WORKER_LOCK_SPACE, key]);
      if (await lock.acquire()) return (this.liveness = { lock, key });
    }
  }

  /**
   * Queues again what workers that are gone (their lock is free) hold. (What a worker that hangs holds
   * is due again once its claims lapse.)
   */
  private async reap(): Promise<void> {
    const liveness = this.liveness;
    if (!liveness?.lock.held()) return;
    const now = this.deps.clock();
    for (const holder of await this.deps.queue.claimHolders(liveness.key)) {
      // Its lock free means its process, or that process's session, is gone.
      const gone = this.deps.session.lock([WORKER_LOCK_SPACE, holder]);
      if (!(await gone.acquire())) continue;
      try {
        const released = await this.deps.queue.release({ worker: holder }, now);
        this.deps.logger.warn(
          { worker: holder, deliveries: released },
          'queued again the deliveries of a worker that is gone',
        );
      } finally {
        await gone.release();
      }
    }
  }
}
