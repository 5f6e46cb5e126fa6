import { baseError, type DomainError, type ErrorKind } from '@ofp/contracts';

/** The one place where a domain error kind becomes an HTTP status (API.md §3). */
export function statusOf(kind: ErrorKind): number {
  switch (kind) {
    case 'Invalid':
      return 400;
    case 'Unauthenticated':
      return 401;
    case 'Forbidden':
      return 403;
    case 'NotFound':
      return 404;
    case 'MethodNotAllowed':
      return 405;
    case 'Conflict':
      return 409;
    case 'Gone':
      return 410;
    case 'PreconditionFailed':
      return 412;
    case 'PayloadTooLarge':
      return 413;
    case 'UnsupportedMediaType':
      return 415;
    case 'Unprocessable':
      return 422;
    case 'RateLimited':
      return 429;
    case 'Unavailable':
      return 503;
    default: {
      const unhandled: never = kind;
      throw new Error(`unmapped error kind ${String(unhandled)}`);
    }
  }
}

/**
 * What Postgres says of a value it cannot take (SQLSTATE classes 22, data exception, and 54, program
 * limit exceeded), as the request's error: only input causes them, so they are a 422, never a 500
 * (API.md §3). Validation refuses such values first; one reaching Postgres is a gap in it, which the
 * caller logs. `undefined` for any other error.
 */
export function refusedValueError(error: unknown): DomainError | undefined {
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  if (typeof code !== 'string' || !/^(22|54)[0-9A-Z]{3}$/.test(code)) return undefined;
  return baseError(
    'Unprocessable',
    `A value cannot be stored: ${REFUSED_VALUES[code] ?? REFUSED_VALUES[code.slice(0, 2)]}`,
  );
}

/** Why, by SQLSTATE (https://www.postgresql.org/docs/current/errcodes-appendix.html), then by class. */
const REFUSED_VALUES: Readonly<Record<string, string>> = {
  '22001': 'a text is longer than its column holds',
  '22003': 'a number is out of the range its column holds',
  '22007': 'a date or time is malformed',
  '22008': 'a date or time is out of range',
  '22021': 'a text holds bytes that are not UTF-8',
  '22P02': 'a value is not of its column type',
  '22P05': 'a text holds a character that cannot be stored (such as \\u0000)',
  '22': 'a value is not one its column holds',
  '54': 'a value is too large or too deeply nested',
};
