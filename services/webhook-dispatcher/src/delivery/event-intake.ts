import { recordStreamId } from '@ofp/contracts';
import type { StoredEvent } from '@ofp/event-store';
import { MODELS, eventPayload, findModel, publishedEventOf, type ModelDefinition } from '@ofp/models';
import { webhooks } from '../models.js';
import { validTraceparent } from '@ofp/runtime';
import { subscribes, type SubscriberCache } from '../subscriptions/subscribers.js';
import type { DeliveryQueue, NewDelivery } from './delivery-queue.js';

/** The bus consumer group of the dispatcher: its progress is shared by all its processes. */
export const INTAKE_GROUP = 'webhook-dispatcher';

/** Every model's stream type, and the webhooks' own (`webhook.disabled` and the rest, API.md §8). */
export function intakeStreamTypes(): string[] {
  return [...Object.keys(MODELS), webhooks.name];
}

/** The model whose records a stream type's events carry: the api's models, and the webhooks' own. */
function modelOfStream(streamType: string): ModelDefinition | undefined {
  return streamType === webhooks.name ? webhooks : findModel(streamType);
}

/**
 * Turns a batch of events into deliveries, one per subscribed enabled endpoint of the event's
 * organization, in one statement. Resolving means they are durable in the queue; only then does the
 * bus move its checkpoint, so a process that dies at any point gets the batch again, and queueing it
 * again changes nothing (one delivery per endpoint and event).
 */
export class EventIntake {
  constructor(
    private readonly subscribers: SubscriberCache,
    private readonly queue: DeliveryQueue,
    private readonly clock: () => Date,
  ) {}

  async handle(events: readonly StoredEvent[]): Promise<void> {
    const orgIds = [...new Set(events.flatMap((event) => (event.orgId === null ? [] : [event.orgId])))];
    if (orgIds.length === 0) return;
    // A webhook's own event commits with its change: its organization's subscribers are looked up
    // again, whether or not the change's notification has come yet.
    for (const event of events)
      if (event.streamType === webhooks.name && event.orgId !== null) this.subscribers.forget(event.orgId);
    const subscriptions = await this.subscribers.of(orgIds);
    const deliveries: NewDelivery[] = [];
    for (const event of events) {
      if (event.orgId === null) continue;
      let payload: string | undefined;
      const about = webhookOf(event);
      for (const subscription of subscriptions.get(event.orgId) ?? []) {
        if (!subscribes(subscription, event.type, about)) continue;
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
}

/** The webhook an event is about, when it is one of a webhook's own changes (its stream). */
function webhookOf(event: StoredEvent): number | undefined {
  if (event.streamType !== webhooks.name) return undefined;
  const id = Number(event.streamId.slice(webhooks.name.length + 1));
  return event.streamId === recordStreamId(webhooks.name, id) ? id : undefined;
}
