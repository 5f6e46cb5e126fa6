import { column, defineModel, eventExample, joined, list, LONG_TEXT, MAX_ID, orders } from '@ofp/models';

// The dispatcher's models (API.md §8), declared with the registry's functions like the api's: it serves
// them (`/v2/webhooks*`, `/v2/webhook_deliveries*`) from its own schema, and keeps `secret` out of them.

/**
 * Where a delivery stands: queued (on the wire included, until its attempt is recorded), delivered, or
 * given up (the ones `recover` re-sends).
 */
export const WEBHOOK_DELIVERY_STATUSES = ['pending', 'succeeded', 'failed'] as const;

/**
 * Why an attempt failed: no answer in time, no address, refused or broken connection, a non-2xx; or
 * `secret`: nothing was sent, since the endpoint's stored signing secret did not open (API.md §12).
 */
export const WEBHOOK_ATTEMPT_ERROR_KINDS = [
  'timeout',
  'dns',
  'refused',
  'tls',
  'http_status',
  'blocked',
  'network',
  'secret',
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

/** The event `POST /v2/webhooks/{id}/test` sends to that endpoint alone (API.md §8). */
export const TEST_EVENT_TYPE = 'webhook.test';

/** The highest delivery rate an endpoint may ask for, per second (Svix's throttle, Convoy's limit). */
export const MAX_RATE_LIMIT = 10_000;

export const webhooks = defineModel({
  name: 'webhooks',
  singular: 'webhook',
  writeScope: 'write',
  // In the API's form, `events` a list of strings: the only form the descriptions publish.
  example: {
    record: {
      id: 12,
      url: 'https://erp.example.com/hooks/ofp',
      events: ['order.created', 'order.cancelled', 'shipment.delivered'],
      description: 'ERP order sync',
      enabled: true,
      rate_limit: 50,
      external_id: null,
      created_at: '2026-11-20T09:15:00.000Z',
      updated_at: '2026-11-21T07:30:00.000Z',
      version: 2,
    },
    update: { events: ['order.created', 'order.cancelled', 'shipment.delivered'] },
    previous: { events: ['order.created', 'order.cancelled'] },
    events: { 'webhook.disabled': { record: { enabled: false }, previous: { enabled: true } } },
  },
  events: {
    'webhook.disabled':
      "An endpoint was disabled by the dispatcher (a 410, or 5 days of failures); sent to the organization's other endpoints",
    'webhook.test': 'Sent by POST /v2/webhooks/{id}/test to that endpoint alone',
    [DELIVERY_FAILED_EVENT_TYPE]:
      "A delivery's last attempt failed and it was given up (data: the delivery, with its attempts and payload); sent to the organization's other endpoints",
  },
  fields: {
    url: column.string({
      required: true,
      maxLength: 2000,
      description:
        'The https URL deliveries are POSTed to; private, loopback and link-local targets are refused unless the deployment allows them (WEBHOOK_ALLOW_PRIVATE_TARGETS, which also allows http)',
    }),
    // Event types (`order.created`) or `*`. Registry lists hold objects, so each element is `{type}`
    // here (`q`: `events.type`); the dispatcher's HTTP layer reads and writes plain strings.
    events: list(
      { type: column.string({ required: true, maxLength: 100, description: 'An event type, or `*`' }) },
      { maxItems: 100, description: 'Event types, or ["*"] for all' },
    ),
    description: column.string({ maxLength: LONG_TEXT, description: 'Free text' }),
    enabled: column.boolean({
      default: true,
      description:
        'False: nothing is delivered to it (the dispatcher sets it after a 410 or 5 days of failures)',
    }),
    rate_limit: column.integer({
      min: 1,
      max: MAX_RATE_LIMIT,
      description:
        "Most deliveries per second to this endpoint, across every dispatcher (in bursts of at most a tenth of a second's worth); deliveries beyond it wait, in order, for their turn. Null: no limit but the concurrency cap (WEBHOOK_ENDPOINT_CONCURRENCY)",
    }),
    deliveries: joined(() => webhookDeliveries, {
      column: 'id',
      targetColumn: 'webhook_id',
      description: 'Its deliveries, for `q` (`deliveries.status`); not in the record',
    }),
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
  example: {
    record: {
      id: 88001,
      webhook_id: 12,
      event_id: '3f2c9a7e-5b1d-4e8a-9c61-0d7b2e4f8a15',
      event_type: 'order.cancelled',
      status: 'pending',
      attempts: 2,
      next_attempt_at: '2026-11-21T08:05:10.000Z',
      last_status_code: 503,
      last_error: 'HTTP 503',
      attempt_log: [
        {
          started_at: '2026-11-21T07:30:01.000Z',
          duration_ms: 212,
          status_code: 503,
          error_kind: 'http_status',
          error: 'HTTP 503',
          response_excerpt: 'Service Unavailable',
        },
        {
          started_at: '2026-11-21T07:30:06.000Z',
          duration_ms: 15000,
          status_code: null,
          error_kind: 'timeout',
          error: 'no answer within 15 s',
          response_excerpt: null,
        },
      ],
      payload: JSON.stringify(eventExample(orders, 'order.cancelled')),
      external_id: null,
      created_at: '2026-11-21T07:30:01.000Z',
      updated_at: '2026-11-21T07:30:21.000Z',
      version: 3,
    },
    previous: {},
  },
  fields: {
    webhook_id: column.integer({
      readOnly: true,
      nullable: false,
      min: 1,
      max: MAX_ID,
      description: 'The webhook delivered to',
    }),
    event_id: column.string({
      readOnly: true,
      nullable: false,
      maxLength: 36,
      description: 'The event delivered (a UUID, the webhook-id header)',
    }),
    event_type: column.string({
      readOnly: true,
      nullable: false,
      maxLength: 100,
      description: 'Its event type',
    }),
    status: column.string({
      readOnly: true,
      nullable: false,
      values: WEBHOOK_DELIVERY_STATUSES,
      description:
        'pending (queued or on the wire), succeeded (a 2xx), or failed (retries exhausted: recover re-sends it)',
    }),
    attempts: column.integer({
      readOnly: true,
      nullable: false,
      min: 0,
      description: 'Attempts made so far',
    }),
    next_attempt_at: column.timestamp({
      readOnly: true,
      description: 'When the next attempt is due (RFC 3339, UTC); null once it succeeded or failed',
    }),
    last_status_code: column.integer({
      readOnly: true,
      description: "The HTTP status of the last attempt's answer; null before one, or when none came",
    }),
    last_error: column.string({
      readOnly: true,
      maxLength: 1000,
      description: 'Why the last attempt failed; null if it did not',
    }),
    // One element per try (oldest first), so a subscriber can see what failed and when.
    attempt_log: list(
      {
        started_at: column.timestamp({
          readOnly: true,
          nullable: false,
          description: 'When the attempt started (RFC 3339, UTC)',
        }),
        duration_ms: column.integer({
          readOnly: true,
          nullable: false,
          description: 'How long it took, in milliseconds',
        }),
        status_code: column.integer({
          readOnly: true,
          description: 'The HTTP status answered; null when none came',
        }),
        error_kind: column.string({
          readOnly: true,
          values: WEBHOOK_ATTEMPT_ERROR_KINDS,
          description:
            'Why it failed: no answer in time, no address, refused, TLS, a non-2xx, a blocked address, or another network error; null on success',
        }),
        error: column.string({
          readOnly: true,
          maxLength: 1000,
          description: 'What failed, in words; null on success',
        }),
        response_excerpt: column.string({
          readOnly: true,
          maxLength: 2000,
          description: "The start of the receiver's answer body",
        }),
      },
      { description: 'Every attempt, oldest first' },
    ),
    // The exact body every attempt sends and signs (a JSON text), kept with the delivery for as long
    // as the delivery is kept (WEBHOOK_DELIVERY_RETENTION_DAYS after it finished).
    payload: column.string({
      readOnly: true,
      nullable: false,
      maxLength: MAX_PAYLOAD_LENGTH,
      description:
        'The exact JSON body every attempt sends and signs, kept for WEBHOOK_DELIVERY_RETENTION_DAYS after the delivery finished',
    }),
  },
});
