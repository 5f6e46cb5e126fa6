import { DomainError } from '@ofp/contracts';

/** Losing an append race, or appending on a stale expected version. */
export class WrongExpectedVersion extends DomainError {
  constructor(
    readonly streamId: string,
    readonly expectedVersion: number,
  ) {
    super('Conflict', {
      base: [`The record was changed concurrently (expected version ${expectedVersion})`],
    });
  }
}

/**
 * A write to a stream one of whose events a consumer group parked (API.md §12): refused, nothing
 * appended, instead of waiting for read-your-writes behind an event that will not be applied until an
 * operator retries it.
 */
export class StreamParked extends DomainError {
  constructor(
    readonly streamId: string,
    readonly eventId: string,
    readonly consumerGroup: string,
  ) {
    super(
      'Unavailable',
      {
        base: [
          `The record's event ${eventId} is parked by ${consumerGroup}: it takes no write until an operator retries it (GET /admin/parked_events)`,
        ],
      },
      { 'Retry-After': '60' },
    );
  }
}
