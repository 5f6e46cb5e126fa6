import { closest } from 'fastest-levenshtein';
import { z } from 'zod';
import {
  MODELS,
  eventExample,
  eventPayloadSchema,
  recordFields,
  recordSchema,
  type EventExample,
  type EventType,
  type ModelDefinition,
} from '@ofp/models';
import { DELIVERY_FAILED_EVENT_TYPE, webhookDeliveries, webhooks } from '../models.js';

/**
 * A webhook as the API shows it: the registry keeps each subscribed event type as `{type}` (so that
 * `q` finds it as `events.type`), the API a list of strings; `secret` only in the answers of create
 * and rotate_secret.
 */
export function webhookSchema(): z.ZodObject {
  return (webhookSchemas.record ??= recordFields(webhooks)
    .extend({ events: z.array(z.string()).describe('Event types, or ["*"] for all') })
    .meta({
      id: 'Webhook',
      description: 'A webhook subscription (API.md §8)',
      examples: [webhooks.example!.record],
    }));
}

export function webhookWithSecretSchema(): z.ZodObject {
  return (webhookSchemas.withSecret ??= webhookSchema()
    .extend({ secret: z.string().describe('whsec_ and the base64 of 32 random bytes: shown this once') })
    .meta({
      id: 'WebhookWithSecret',
      examples: [
        { ...webhooks.example!.record, secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/jyQ1ZNvhh0=' },
      ],
    }));
}

const webhookSchemas: { record?: z.ZodObject; withSecret?: z.ZodObject } = {};

/** The models whose changes are events: the api's, and the webhooks' own. */
const EVENT_MODELS: readonly ModelDefinition[] = [...Object.values(MODELS), webhooks];

/** Every event type the platform sends (API.md §8), as `GET /v2/webhook_event_types` lists them. */
export const EVENT_TYPES: readonly EventType[] = EVENT_MODELS.flatMap((model) => model.eventTypes);

const KNOWN = new Set(EVENT_TYPES.map(({ type }) => type));

export function isEventType(type: string): boolean {
  return KNOWN.has(type);
}

/** The event type nearest to a refused one (`people.created` → `person.created`). */
export function closestEventType(given: string): string {
  return closest(given, [...KNOWN]);
}

/** Each event type with the schema of the body its deliveries carry, for the published descriptions. */
export function eventCatalog(): (EventType & { readonly payload: z.ZodType })[] {
  return EVENT_MODELS.flatMap((model) =>
    model.eventTypes.map((eventType) => ({
      ...eventType,
      payload: eventPayloadSchema(
        model,
        eventType,
        dataSchema(model, eventType.type),
        example(model, eventType.type),
      ),
    })),
  );
}

/** The example delivery body of an event type: a given-up delivery's notice carries the delivery. */
function example(model: ModelDefinition, type: string): EventExample | undefined {
  const body = eventExample(model, type);
  if (type !== DELIVERY_FAILED_EVENT_TYPE || body === undefined) return body;
  const { record } = webhookDeliveries.example!;
  const delivery = { ...record, status: 'failed', next_attempt_at: null };
  return { ...body, sequence: record.version as number, data: delivery, previous_attributes: {} };
}

/** The record an event of `type` carries as its data: a webhook in its API form, a delivery, a record. */
export function dataSchema(model: ModelDefinition, type: string): z.ZodObject {
  if (type === DELIVERY_FAILED_EVENT_TYPE) return recordSchema(webhookDeliveries);
  return model === webhooks ? webhookSchema() : recordSchema(model);
}
