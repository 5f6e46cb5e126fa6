import { DomainError, type FieldErrors } from '@ofp/contracts';
import { z } from 'zod';
import { requestBodySchema, schemaName, validateCreate, validateUpdate } from '@ofp/models';
import { webhooks } from '../models.js';
import { EVENT_TYPES, closestEventType, isEventType } from '../subscriptions/event-catalog.js';
import type { WebhookFields } from '../subscriptions/webhook-decider.js';

/**
 * Validates a webhook write body (API.md §5: fields at top level; unknown and read-only fields, `secret`
 * included, are ignored) with the registry's rules, `events` being a list of event types here where the
 * registry keeps `{type}` objects. Create needs `url` and at least one event type.
 *
 * @throws DomainError `Unprocessable` with every problem by column (`url`, `events[1]`).
 */
export function webhookBody(body: unknown, mode: 'create' | 'update'): Partial<WebhookFields> {
  const errors: FieldErrors = {};
  const given = isObject(body) ? body : undefined;
  // `events` is checked here; the registry checks the rest (a body that is no object included).
  const { events: givenEvents, ...rest } = given ?? {};
  let fields: Record<string, unknown> = {};
  try {
    fields = (mode === 'create' ? validateCreate : validateUpdate)(webhooks, given ? rest : body);
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    Object.assign(errors, error.errors);
  }
  let events: string[] | undefined;
  if (given && Object.hasOwn(given, 'events')) events = eventTypes(givenEvents, errors);
  else if (given && mode === 'create') errors.events = ['is required'];
  if (Object.keys(errors).length > 0) throw new DomainError('Unprocessable', errors);
  // Create fills the registry's default for the list left out; the types checked above replace it.
  const { events: _default, ...validated } = fields;
  return { ...validated, ...(events === undefined ? {} : { events }) };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** How many entries `events` may have (the registry's list). */
const EVENTS_LIMIT = webhooks.fields.events?.kind === 'list' ? webhooks.fields.events.maxItems : 0;

/**
 * `events`: a non-empty list of `*` or event types of the catalog (API.md §8), duplicates dropped; a
 * refused one is answered with the closest that exists.
 */
function eventTypes(value: unknown, errors: FieldErrors): string[] | undefined {
  if (!Array.isArray(value) || value.length === 0) {
    errors.events = ['must be a non-empty array of event types (such as "order.created") or ["*"]'];
    return undefined;
  }
  if (value.length > EVENTS_LIMIT) {
    errors.events = [`must have at most ${EVENTS_LIMIT} elements`];
    return undefined;
  }
  value.forEach((type: unknown, index) => {
    if (type === '*' || (typeof type === 'string' && isEventType(type))) return;
    const hint =
      typeof type === 'string' && type !== ''
        ? `: did you mean "${closestEventType(type)}"?`
        : ' such as "order.created"';
    errors[`events[${index}]`] = [`must be "*" or an event type of GET /v2/webhook_event_types${hint}`];
  });
  return [...new Set(value as string[])];
}

const bodySchemas = new Map<'create' | 'update', z.ZodType>();

/** The example webhook's create body: its writable fields, `events` a list of strings. */
function createExample(): Record<string, unknown> {
  const { url, events, description, enabled, rate_limit, external_id } = webhooks.example!.record;
  return { url, events, description, enabled, rate_limit, external_id };
}

/** A webhook write body as the published description shows it: `events` a list of strings. */
export function webhookBodySchema(mode: 'create' | 'update'): z.ZodType {
  let schema = bodySchemas.get(mode);
  if (!schema) {
    const types = ['*', ...EVENT_TYPES.map(({ type }) => type)] as [string, ...string[]];
    const events = z
      .array(z.enum(types))
      .min(1)
      .max(EVENTS_LIMIT)
      .describe('Event types (`GET /v2/webhook_event_types` lists them), or ["*"] for all');
    schema = (requestBodySchema(webhooks, mode) as z.ZodObject)
      .extend({ events: mode === 'create' ? events : events.optional() })
      .meta({
        id: `${schemaName(webhooks.singular)}${mode === 'create' ? 'Create' : 'Update'}`,
        examples: [mode === 'create' ? createExample() : webhooks.example!.update],
      });
    bodySchemas.set(mode, schema);
  }
  return schema;
}
