import type { RecordChange } from '@ofp/contracts';
import type { StoredEvent } from '@ofp/event-store';

/** What a delivery body is made of. */
export interface DeliveryEvent {
  readonly id: string;
  readonly type: string;
  readonly timestamp: Date;
  /** The record's version after the change, so a subscriber can drop stale events (API.md §8). */
  readonly sequence: number;
  readonly change: RecordChange;
}

/**
 * The delivery body (API.md §8): `{"id", "type", "timestamp", "sequence", "data", "previous_attributes"}`,
 * `data` the record after the change and `previous_attributes` the changed fields' old values.
 */
export function deliveryBody(event: DeliveryEvent): string {
  return JSON.stringify({
    id: event.id,
    type: event.type,
    timestamp: event.timestamp.toISOString(),
    sequence: event.sequence,
    data: event.change.record,
    previous_attributes: event.change.previous,
  });
}

/** The delivery event of a stored record event (every record event carries a `RecordChange`). */
export function deliveryEventOf(event: StoredEvent): DeliveryEvent {
  return {
    id: event.eventId,
    type: event.type,
    timestamp: event.recordedAt,
    sequence: event.version,
    change: event.data as RecordChange,
  };
}
