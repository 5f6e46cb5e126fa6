import type { RecordChange } from '@ofp/contracts';

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

/** The published event of a stored record event (every record event carries a `RecordChange`). */
export function publishedEventOf(event: {
  readonly eventId: string;
  readonly type: string;
  readonly recordedAt: Date;
  readonly version: number;
  readonly data: unknown;
}): PublishedEvent {
  return {
    id: event.eventId,
    type: event.type,
    timestamp: event.recordedAt,
    sequence: event.version,
    change: event.data as RecordChange,
  };
}
