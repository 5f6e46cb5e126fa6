import { DomainError, type FieldErrors } from '@ofp/contracts';
import { MODELS, validateCreate, validateUpdate } from '@ofp/models';
import { webhooks } from '../models.js';
import type { WebhookFields } from '../subscriptions/webhook-decider.js';

/** API.md §8: every model's `<singular>.<change>` and the webhooks' own, or `*` for all of them. */
const EVENT_TYPE = /^([a-z][a-z_]*)\.[a-z][a-z_]*$/;

/** The models whose events exist: the registry's, and the webhooks' own. */
function knownSingulars(): Set<string> {
  return new Set([...Object.values(MODELS).map((model) => model.singular), webhooks.singular]);
}

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

/** `events`: a non-empty list of known event types or `*`, duplicates dropped. */
function eventTypes(value: unknown, errors: FieldErrors): string[] | undefined {
  const limit = webhooks.fields.events?.kind === 'list' ? webhooks.fields.events.maxItems : 0;
  if (!Array.isArray(value) || value.length === 0) {
    errors.events = ['must be a non-empty array of event types (such as "order.created") or ["*"]'];
    return undefined;
  }
  if (value.length > limit) {
    errors.events = [`must have at most ${limit} elements`];
    return undefined;
  }
  const singulars = knownSingulars();
  value.forEach((type: unknown, index) => {
    const model = typeof type === 'string' ? EVENT_TYPE.exec(type)?.[1] : undefined;
    if (type !== '*' && (model === undefined || !singulars.has(model)))
      errors[`events[${index}]`] = ['must be "*" or an event type such as "order.created"'];
  });
  return [...new Set(value as string[])];
}
