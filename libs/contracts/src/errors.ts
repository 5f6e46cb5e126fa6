/**
 * Domain errors are values with a kind. Nothing below the HTTP layer knows about status codes: the
 * HTTP layer maps each kind to a status in one place (`@ofp/runtime`'s `statusOf`).
 */
export type ErrorKind =
  | 'Invalid' // the request is malformed (bad JSON, bad q, bad header)
  | 'Unprocessable' // well-formed, but field validation failed
  | 'Unauthenticated'
  | 'Forbidden'
  | 'NotFound'
  | 'MethodNotAllowed'
  | 'Conflict'
  | 'Gone' // what the request names is no longer kept (a feed cursor older than the retention)
  | 'PreconditionFailed'
  | 'PayloadTooLarge'
  | 'UnsupportedMediaType'
  | 'RateLimited'
  | 'Unavailable';

/** Column errors as the envelope carries them: `{ "<column>": ["message", ...] }`. */
export type FieldErrors = Record<string, string[]>;

export class DomainError extends Error {
  override readonly name = 'DomainError';
  constructor(
    readonly kind: ErrorKind,
    readonly errors: FieldErrors,
    readonly headers: Readonly<Record<string, string>> = {},
    /** A `Forbidden` for want of a scope: the scope, which the HTTP layer names in its challenge. */
    readonly requiredScope?: string,
  ) {
    super(`${kind}: ${JSON.stringify(errors)}`);
  }
}

/** An error about the request as a whole, reported under `errors.base`. */
export function baseError(kind: ErrorKind, message: string, headers?: Record<string, string>): DomainError {
  return new DomainError(kind, { base: [message] }, headers);
}

/** An error about one column (a path such as `phone_numbers[0].number` or `q.filters[1].operator`). */
export function fieldError(kind: ErrorKind, column: string, message: string): DomainError {
  return new DomainError(kind, { [column]: [message] });
}

/** The token lacks `scope` (API.md §7): a 403. */
export function missingScope(scope: string): DomainError {
  return new DomainError('Forbidden', { base: [`The access token lacks the ${scope} scope`] }, {}, scope);
}

export function isDomainError(error: unknown): error is DomainError {
  return error instanceof DomainError;
}
