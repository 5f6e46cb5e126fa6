import { recordStreamId } from '@ofp/contracts';
import type { StoredEvent } from '@ofp/event-store';
import { MODELS, eventPayload, publishedEventOf, type ModelDefinition } from '@ofp/models';
import { webhooks } from '../models.js';
import { prepared, validTraceparent, type Pool } from '@ofp/runtime';
import type { DeliveryQueue, NewDelivery } from './delivery-queue.js';

/** The bus consumer group of the dispatcher: its progress is shared by all its processes. */
export const INTAKE_GROUP = 'webhook-dispatcher';

/** Every model's stream type, and the webhooks' own (`webhook.disabled` and the rest, API.md §8). */
export function intakeStreamTypes(): string[] {
  return [...Object.keys(MODELS), webhooks.name];
}

/** The model whose records a stream type's events carry: the api's models, and the webhooks' own. */
function modelOfStream(streamType: string): ModelDefinition | undefined {
  return streamType === webhooks.name ? webhooks : MODELS[streamType];
}

interface Subscription {
  readonly id: number;
  readonly events: readonly string[];
}

/**
 * Turns a batch of events into deliveries, one per subscribed enabled endpoint of the event's
 * organization, in one statement. Resolving means they are durable in the queue; only then does the
 * bus move its checkpoint, so a process that dies at any point gets the batch again, and queueing it
 * again changes nothing (one delivery per endpoint and event).
 */
export class EventIntake {
  constructor(
    private readonly pool: Pool,
    private readonly queue: DeliveryQueue,
    private readonly clock: () => Date,
  ) {}

  async handle(events: readonly StoredEvent[]): Promise<void> {
    const orgIds = [...new Set(events.flatMap((event) => (event.orgId === null ? [] : [event.orgId])))];
    if (orgIds.length === 0) return;
    const subscriptions = await this.subscriptions(orgIds);
    const deliveries: NewDelivery[] = [];
    for (const event of events) {
      if (event.orgId === null) continue;
      let payload: string | undefined;
      for (const subscription of subscriptions.get(event.orgId) ?? []) {
        if (!subscribes(subscription, event)) continue;
        payload ??= eventPayload(publishedEventOf(event, modelOfStream(event.streamType)));
        deliveries.push({
          orgId: event.orgId,
          webhookId: subscription.id,
          eventId: event.eventId,
          eventType: event.type,
          streamId: event.streamId,
          sequence: event.version,
          payload,
          traceparent: validTraceparent(event.metadata.traceparent),
        });
      }
    }
    await this.queue.enqueue(deliveries, this.clock());
  }

  /** The enabled endpoints of the organizations, with the event types they subscribe to. */
  private async subscriptions(orgIds: readonly number[]): Promise<Map<number, Subscription[]>> {
    const { rows } = await this.pool.query<{ id: number; org_id: number; events: string[] }>(
      prepared(
        `SELECT w.id, w.org_id, array_remove(array_agg(e.type ORDER BY e.ordinal), NULL) AS events
         FROM webhooks.webhooks w
         LEFT JOIN webhooks.webhooks__events e ON e.record_id = w.id
        WHERE w.enabled AND w.org_id = ANY($1::bigint[])
        GROUP BY w.id, w.org_id`,
        [orgIds],
      ),
    );
    const byOrg = new Map<number, Subscription[]>();
    for (const row of rows) byOrg.set(row.org_id, [...(byOrg.get(row.org_id) ?? []), row]);
    return byOrg;
  }
}

/**
 * Whether an endpoint gets an event: it names the type or `*`; and a webhook's own changes go to the
 * organization's other endpoints, not to itself (a disabled endpoint could not take its
 * `webhook.disabled` anyway).
 */
function subscribes(subscription: Subscription, event: StoredEvent): boolean {
  if (event.streamId === recordStreamId(webhooks.name, subscription.id)) return false;
  return subscription.events.includes('*') || subscription.events.includes(event.type);
}
