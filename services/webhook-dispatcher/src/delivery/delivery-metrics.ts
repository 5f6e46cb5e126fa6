import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { sharedReading } from '@ofp/runtime';
import { DISABLE_REASONS, type DisableReason } from '../subscriptions/webhook-decider.js';
import type { QueueDepth } from './delivery-queue.js';
import type { AttemptVerdict } from './retry-schedule.js';

/** What became of an attempt's delivery: delivered, to be retried, or given up. */
const OUTCOMES = ['succeeded', 'retrying', 'failed'] as const;
type Outcome = (typeof OUTCOMES)[number];

/**
 * Why a recording of attempts failed: `transient`, the database could not answer then (it is tried
 * again); `permanent`, an error the same statement will meet again (a constraint, a bug).
 */
export const RECORDING_FAILURE_CAUSES = ['transient', 'permanent'] as const;
export type RecordingFailureCause = (typeof RECORDING_FAILURE_CAUSES)[number];

function outcomeOf(verdict: AttemptVerdict): Outcome {
  switch (verdict.status) {
    case 'succeeded':
      return 'succeeded';
    case 'pending':
      return 'retrying';
    case 'failed':
      return 'failed';
    default: {
      const unhandled: never = verdict;
      throw new Error(`unhandled verdict ${JSON.stringify(unhandled)}`);
    }
  }
}

/**
 * The dispatcher's Prometheus metrics: attempts by outcome, attempt durations, queue depth by state,
 * the age of the oldest due delivery, endpoints disabled, deliveries held back by endpoints' rates,
 * failed recordings of attempts. Counters start at 0 for every known label
 * value: a series born at its first event shows no `increase()`, so the chart's alert on the first
 * disabled endpoint after a pod start would not fire.
 */
export class DeliveryMetrics {
  private readonly attempts: Counter<'outcome'>;
  private readonly duration: Histogram<'outcome'>;
  private readonly disables: Counter<'reason'>;
  private readonly unopened: Counter;
  private readonly rateLimited: Counter;
  private readonly recordingFailures: Counter<'cause'>;

  constructor(registry: Registry, depth: () => Promise<QueueDepth>) {
    // One reading of the queue serves both gauges of a scrape.
    const read = sharedReading(registry, 'webhook_delivery_queue', depth);
    this.attempts = new Counter({
      name: 'webhook_delivery_attempts_total',
      help: 'Webhook delivery attempts by what became of the delivery (succeeded, retrying, failed = given up)',
      labelNames: ['outcome'],
      registers: [registry],
    });
    this.duration = new Histogram({
      name: 'webhook_delivery_attempt_duration_seconds',
      help: 'Duration of webhook delivery attempts, connect to response excerpt',
      labelNames: ['outcome'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15],
      registers: [registry],
    });
    new Gauge({
      name: 'webhook_delivery_queue_depth',
      help: 'Webhook deliveries queued (pending, due or not) and in flight (sending)',
      labelNames: ['status'],
      registers: [registry],
      async collect() {
        const queue = await read();
        if (!queue) return;
        this.set({ status: 'pending' }, queue.pending);
        this.set({ status: 'sending' }, queue.sending);
      },
    });
    new Gauge({
      name: 'webhook_delivery_oldest_due_age_seconds',
      help: 'How long the oldest pending delivery that is due has waited past its due time (0 when none is due)',
      registers: [registry],
      async collect() {
        const queue = await read();
        if (queue) this.set(queue.oldestDueSeconds);
      },
    });
    this.disables = new Counter({
      name: 'webhook_endpoints_disabled_total',
      help: 'Webhook endpoints disabled by the dispatcher, by reason (gone: a 410; failing: 5 days of failures)',
      labelNames: ['reason'],
      registers: [registry],
    });
    this.unopened = new Counter({
      name: 'webhook_secrets_unopened_total',
      help: "Webhook delivery attempts not sent because the endpoint's stored signing secret did not open (a key missing from SECRETS_KEY_FILE, an altered value)",
      registers: [registry],
    });
    this.rateLimited = new Counter({
      name: 'webhook_deliveries_rate_limited_total',
      help: "Due webhook deliveries a claim held back because their endpoint's rate (rate_limit, per second) was spent, put off to when its next tokens come (one held back by several claims counts each time)",
      registers: [registry],
    });
    this.recordingFailures = new Counter({
      name: 'webhook_attempt_recordings_failed_total',
      help: 'Statements recording webhook attempts that failed, by cause: transient (the database could not answer; tried again) or permanent (an error that will not change: the batch is split until the attempt that fails is left unrecorded, and its delivery is sent again once its claim lapses)',
      labelNames: ['cause'],
      registers: [registry],
    });
    for (const outcome of OUTCOMES) this.attempts.inc({ outcome }, 0);
    for (const cause of RECORDING_FAILURE_CAUSES) this.recordingFailures.inc({ cause }, 0);
    for (const reason of DISABLE_REASONS) this.disables.inc({ reason }, 0);
  }

  disabled(reason: DisableReason): void {
    this.disables.inc({ reason });
  }

  secretUnopened(): void {
    this.unopened.inc();
  }

  heldBackByRate(deliveries: number): void {
    if (deliveries > 0) this.rateLimited.inc(deliveries);
  }

  recordingFailed(cause: RecordingFailureCause): void {
    this.recordingFailures.inc({ cause });
  }

  observe(verdict: AttemptVerdict, durationMs: number): void {
    const outcome = outcomeOf(verdict);
    this.attempts.inc({ outcome });
    this.duration.observe({ outcome }, durationMs / 1000);
  }
}
