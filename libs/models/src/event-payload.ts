import type { RecordChange } from '@ofp/contracts';
import type { ModelDefinition } from './fields.js';
import { inRegistryOrder } from './key-order.js';
import { findModel } from './registry.js';

/**
 * What an event's published body is made of: the one rendering that webhook deliveries and the
 * events feed (`GET /v2/events`) share, so that a subscriber and a poller read the same bytes.
 */
export interface PublishedEvent {
  readonly id: string;
  readonly type: string;
  readonly timestamp: Date;
  /** The record's version after the change, so a subscriber can drop stale events (API.md §8). */
  readonly sequence: number;
  readonly change: RecordChange;
}

/**
 * The published body of an event (API.md §8): `{"id", "type", "timestamp", "sequence", "data",
 * "previous_attributes"}`, `data` the record after the change and `previous_attributes` the changed
 * fields' old values.
 */
export function eventPayload(event: PublishedEvent): string {
  return JSON.stringify({
    id: event.id,
    type: event.type,
    timestamp: event.timestamp.toISOString(),
    sequence: event.sequence,
    data: event.change.record,
    previous_attributes: event.change.previous,
  });
}

/**
 * The published event of a stored record event (every record event carries a `RecordChange`), the
 * record and its previous values with their keys in the order API responses give them (the event
 * store keeps them as jsonb, which orders keys its own way). `model` declares that order: by default
 * the registry's model of the event's stream type; one the registry does not hold leaves them as stored.
 */
export function publishedEventOf(
  event: {
    readonly eventId: string;
    readonly streamType: string;
    readonly type: string;
    readonly recordedAt: Date;
    readonly version: number;
    readonly data: unknown;
  },
  model: ModelDefinition | undefined = findModel(event.streamType),
): PublishedEvent {
  const change = event.data as RecordChange;
  return {
    id: event.eventId,
    type: event.type,
    timestamp: event.recordedAt,
    sequence: event.version,
    change: model
      ? {
          ...change,
          record: inRegistryOrder(model.fields, change.record) as RecordChange['record'],
          previous: inRegistryOrder(model.fields, change.previous),
        }
      : change,
  };
}
