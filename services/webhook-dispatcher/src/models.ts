import { column, defineModel, joined, list, LONG_TEXT, MAX_ID } from '@ofp/models';

// The dispatcher's models (API.md §8), declared with the registry's functions like the api's: it serves
// them (`/v2/webhooks*`, `/v2/webhook_deliveries*`) from its own schema, and keeps `secret` out of them.

/**
 * Where a delivery stands: queued (on the wire included, until its attempt is recorded), delivered, or
 * given up (the ones `recover` re-sends).
 */
export const WEBHOOK_DELIVERY_STATUSES = ['pending', 'succeeded', 'failed'] as const;

/** Why an attempt failed: no answer in time, no address, refused or broken connection, a non-2xx. */
export const WEBHOOK_ATTEMPT_ERROR_KINDS = [
  'timeout',
  'dns',
  'refused',
  'tls',
  'http_status',
  'blocked',
  'network',
] as const;

/**
 * The longest body a delivery may carry, in characters: a record at the body limit of a write (1 MiB),
 * its previous values as long again, and the envelope.
 */
const MAX_PAYLOAD_LENGTH = 4 * 1024 * 1024;

/**
 * The notice that a delivery's last attempt failed, its retries exhausted (Svix's
 * `message.attempt.exhausted`): the dispatcher's own, its data the delivery (`webhook_deliveries`).
 */
export const DELIVERY_FAILED_EVENT_TYPE = 'webhook.delivery_failed';

export const webhooks = defineModel({
  name: 'webhooks',
  singular: 'webhook',
  writeScope: 'write',
  events: {
    'webhook.disabled':
      "An endpoint was disabled by the dispatcher (a 410, or 5 days of failures); sent to the organization's other endpoints",
    'webhook.test': 'Sent by POST /v2/webhooks/{id}/test to that endpoint alone',
    [DELIVERY_FAILED_EVENT_TYPE]:
      "A delivery's last attempt failed and it was given up (data: the delivery, with its attempts and payload); sent to the organization's other endpoints",
  },
  fields: {
    url: column.string({ required: true, maxLength: 2000 }),
    // Event types (`order.created`) or `*`. Registry lists hold objects, so each element is `{type}`
    // here (`q`: `events.type`); the dispatcher's HTTP layer reads and writes plain strings.
    events: list({ type: column.string({ required: true, maxLength: 100 }) }, { maxItems: 100 }),
    description: column.string({ maxLength: LONG_TEXT }),
    enabled: column.boolean({ default: true }),
    deliveries: joined(() => webhookDeliveries, { column: 'id', targetColumn: 'webhook_id' }),
  },
});

export const webhookDeliveries = defineModel({
  name: 'webhook_deliveries',
  singular: 'webhook_delivery',
  writeScope: 'write',
  writes: 'read-only',
  // The delivery queue writes these rows itself, when a delivery is queued and when each attempt is
  // recorded: no stored document, and only the indexes of likely filters that attempts do not change
  // (the migrations), not one per column, so that recording an attempt is a HOT update.
  storedDocuments: false,
  indexed: false,
  fields: {
    webhook_id: column.integer({ readOnly: true, nullable: false, min: 1, max: MAX_ID }),
    event_id: column.string({ readOnly: true, nullable: false, maxLength: 36 }),
    event_type: column.string({ readOnly: true, nullable: false, maxLength: 100 }),
    status: column.string({ readOnly: true, nullable: false, values: WEBHOOK_DELIVERY_STATUSES }),
    attempts: column.integer({ readOnly: true, nullable: false, min: 0 }),
    next_attempt_at: column.timestamp({ readOnly: true }),
    last_status_code: column.integer({ readOnly: true }),
    last_error: column.string({ readOnly: true, maxLength: 1000 }),
    // One element per try (oldest first), so a subscriber can see what failed and when.
    attempt_log: list({
      started_at: column.timestamp({ readOnly: true, nullable: false }),
      duration_ms: column.integer({ readOnly: true, nullable: false }),
      status_code: column.integer({ readOnly: true }),
      error_kind: column.string({ readOnly: true, values: WEBHOOK_ATTEMPT_ERROR_KINDS }),
      error: column.string({ readOnly: true, maxLength: 1000 }),
      response_excerpt: column.string({ readOnly: true, maxLength: 2000 }),
    }),
    // The exact body every attempt sends and signs (a JSON text), kept with the delivery for as long
    // as the delivery is kept (WEBHOOK_DELIVERY_RETENTION_DAYS after it finished).
    payload: column.string({ readOnly: true, nullable: false, maxLength: MAX_PAYLOAD_LENGTH }),
  },
});
