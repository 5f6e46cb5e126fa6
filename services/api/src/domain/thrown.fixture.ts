import { DomainError } from '@ofp/contracts';

/** The DomainError an action throws, for tests to match its kind and errors; fails when it throws none. */
export function thrown(action: () => unknown): DomainError {
  try {
    action();
  } catch (error) {
    if (error instanceof DomainError) return error;
    throw error;
  }
  throw new Error('expected a DomainError, but nothing was thrown');
}
