import { baseError, fieldError, type RecordChange, type RecordJson } from '@ofp/contracts';
import { webhooks } from '../models.js';

/** A webhook's writable fields in their API form (`events` as plain strings). */
export interface WebhookFields {
  readonly url: string;
  readonly events: readonly string[];
  readonly description: string | null;
  readonly enabled: boolean;
  /** Deliveries per second at most; null: unlimited. */
  readonly rate_limit: number | null;
  readonly external_id: string | null;
}

/** Why the dispatcher disabled an endpoint on its own (API.md §8). */
export const DISABLE_REASONS = ['gone', 'failing'] as const;
export type DisableReason = (typeof DISABLE_REASONS)[number];

export type WebhookCommand =
  | {
      readonly kind: 'create';
      readonly id: number;
      readonly fields: Partial<WebhookFields>;
      readonly at: string;
    }
  | {
      readonly kind: 'update';
      readonly fields: Partial<WebhookFields>;
      readonly at: string;
      readonly ifMatch?: readonly number[];
    }
  | { readonly kind: 'delete'; readonly at: string; readonly ifMatch?: readonly number[] }
  | { readonly kind: 'disable'; readonly reason: DisableReason; readonly at: string };

/** The events a webhook's own changes are announced as (API.md §8). */
export const WEBHOOK_EVENT_TYPES = [
  'webhook.created',
  'webhook.updated',
  'webhook.deleted',
  'webhook.disabled',
] as const;

export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** A decided change of a webhook: the event to append to its stream (`webhooks-<id>`). */
export interface WebhookEvent {
  readonly type: WebhookEventType;
  readonly data: RecordChange;
}

/**
 * Decides what a command does to a webhook (pure): the event to append, `undefined` when nothing
 * changes, or a DomainError. The record in the event is the API form, which never holds the secret.
 */
export function decide(command: WebhookCommand, current: RecordJson | undefined): WebhookEvent | undefined {
  switch (command.kind) {
    case 'create': {
      if (current) throw fieldError('Conflict', 'id', 'has already been taken');
      const record = inRegistryOrder({
        id: command.id,
        url: command.fields.url,
        events: command.fields.events ?? [],
        description: command.fields.description ?? null,
        enabled: command.fields.enabled ?? true,
        rate_limit: command.fields.rate_limit ?? null,
        external_id: command.fields.external_id ?? null,
        created_at: command.at,
        updated_at: command.at,
        version: 1,
      });
      return { type: 'webhook.created', data: { record, previous: {}, deleted: false } };
    }
    case 'update': {
      const record = live(current, command.ifMatch);
      const changed = Object.entries(command.fields).filter(
        ([name, value]) => JSON.stringify(value) !== JSON.stringify(record[name]),
      );
      if (changed.length === 0) return undefined;
      return {
        type: 'webhook.updated',
        data: {
          record: next(record, Object.fromEntries(changed), command.at),
          previous: Object.fromEntries(changed.map(([name]) => [name, record[name]])),
          deleted: false,
        },
      };
    }
    case 'delete': {
      const record = live(current, command.ifMatch);
      return {
        type: 'webhook.deleted',
        data: { record: next(record, {}, command.at), previous: {}, deleted: true },
      };
    }
    case 'disable': {
      if (!current || current.enabled !== true) return undefined;
      return {
        type: 'webhook.disabled',
        data: {
          record: next(current, { enabled: false }, command.at),
          previous: { enabled: true },
          deleted: false,
        },
      };
    }
    default: {
      const unhandled: never = command;
      throw new Error(`unhandled command ${JSON.stringify(unhandled)}`);
    }
  }
}

function live(current: RecordJson | undefined, ifMatch: readonly number[] | undefined): RecordJson {
  if (!current) throw baseError('NotFound', 'webhook not found');
  if (ifMatch !== undefined && !ifMatch.includes(current.version))
    throw baseError('PreconditionFailed', `If-Match does not match the current version ${current.version}`);
  return current;
}

function next(record: RecordJson, changes: Record<string, unknown>, at: string): RecordJson {
  return inRegistryOrder({ ...record, ...changes, updated_at: at, version: record.version + 1 });
}

/** The record's keys in registry order (what a GET renders), the joined `deliveries` left out. */
function inRegistryOrder(record: Record<string, unknown>): RecordJson {
  const ordered: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(webhooks.fields)) {
    if (field.kind !== 'joined') ordered[name] = record[name];
  }
  return ordered as RecordJson;
}

/** The registry stores each subscribed event type as `{type}` (see the registry's `webhooks.events`). */
export function toStoredRecord(record: RecordJson): RecordJson {
  const events = record.events as readonly string[];
  return { ...record, events: events.map((type) => ({ type })) };
}

/** A webhook as the API shows it, from its registry-rendered row. */
export function toApiRecord(stored: Record<string, unknown>): RecordJson {
  const record = stored as RecordJson;
  const events = record.events as readonly { type: string }[];
  return { ...record, events: events.map(({ type }) => type) };
}
