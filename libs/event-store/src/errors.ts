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
