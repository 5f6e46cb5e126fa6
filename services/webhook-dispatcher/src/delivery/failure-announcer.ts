import type { RecordJson } from '@ofp/contracts';
import { eventPayload, getRecord } from '@ofp/models';
import type { Logger, Pool } from '@ofp/runtime';
import { DELIVERY_FAILED_EVENT_TYPE, webhookDeliveries } from '../models.js';
import { TABLES } from '../schema.js';
import { enabledSubscribers, subscribes } from '../subscriptions/subscribers.js';
import type { DeliveryQueue, NewDelivery } from './delivery-queue.js';
import { RunsInTurn } from './runs-in-turn.js';

/** Failures told per round: each is one read of its delivery. */
const BATCH = 200;

interface Failure {
  readonly delivery_id: number;
  readonly event_id: string;
  readonly failed_at: Date;
  /** Null when the delivery is gone (purged) before it was told. */
  readonly org_id: number | null;
  readonly webhook_id: number | null;
}

/**
 * Tells the organization's other endpoints that subscribe to `webhook.delivery_failed` (or `*`) about
 * each delivery given up (Svix's `message.attempt.exhausted`): what `DeliveryQueue.complete` noted in
 * `webhooks.delivery_failures`, with the delivery as the API shows it (its attempts and payload) as
 * data. A notice is queued as a delivery of its own (no record's turn to keep), under the event id the
 * note was given, so that queueing it again after a crash changes nothing; the note goes once its
 * notices are queued. One run at a time; also run at start and regularly, for notes a process left.
 */
export class FailureAnnouncer {
  private readonly runs = new RunsInTurn(() => this.run());

  constructor(
    private readonly pool: Pool,
    private readonly queue: DeliveryQueue,
    private readonly clock: () => Date,
    private readonly logger: Logger,
  ) {}

  request(): void {
    this.runs.request();
  }

  /** Resolves once no run is under way. */
  async idle(): Promise<void> {
    await this.runs.idle();
  }

  private async run(): Promise<void> {
    try {
      let taken: number;
      do taken = await this.announce();
      while (taken === BATCH);
    } catch (error) {
      this.logger.error({ err: error }, 'announcing failed webhook deliveries failed; retrying later');
    }
  }

  /** Tells one batch of failures. @returns how many notes it took. */
  private async announce(): Promise<number> {
    const { rows } = await this.pool.query<Failure>(
      `SELECT f.delivery_id, f.event_id, f.failed_at, d.org_id, d.webhook_id
         FROM webhooks.delivery_failures f
         LEFT JOIN webhooks.webhook_deliveries d ON d.id = f.delivery_id
        ORDER BY f.delivery_id
        LIMIT $1`,
      [BATCH],
    );
    if (rows.length === 0) return 0;
    const subscribers = await enabledSubscribers(this.pool, [
      ...new Set(rows.flatMap((row) => (row.org_id === null ? [] : [row.org_id]))),
    ]);
    const notices: NewDelivery[] = [];
    for (const failure of rows) {
      if (failure.org_id === null) continue;
      const told = (subscribers.get(failure.org_id) ?? []).filter((subscriber) =>
        subscribes(subscriber, DELIVERY_FAILED_EVENT_TYPE, failure.webhook_id ?? undefined),
      );
      if (told.length === 0) continue;
      const record = (await getRecord(
        this.pool,
        webhookDeliveries,
        failure.org_id,
        failure.delivery_id,
        TABLES,
      )) as RecordJson | undefined;
      if (!record) continue;
      const payload = eventPayload({
        id: failure.event_id,
        type: DELIVERY_FAILED_EVENT_TYPE,
        timestamp: failure.failed_at,
        sequence: record.version,
        change: { record, previous: {}, deleted: false },
      });
      for (const subscriber of told) {
        notices.push({
          orgId: failure.org_id,
          webhookId: subscriber.id,
          eventId: failure.event_id,
          eventType: DELIVERY_FAILED_EVENT_TYPE,
          streamId: null,
          sequence: null,
          payload,
        });
      }
    }
    await this.queue.enqueue(notices, this.clock());
    await this.pool.query('DELETE FROM webhooks.delivery_failures WHERE delivery_id = ANY($1::bigint[])', [
      rows.map((row) => row.delivery_id),
    ]);
    this.logger.info(
      { deliveries: rows.length, notices: notices.length },
      'told the organizations about failed webhook deliveries',
    );
    return rows.length;
  }
}
