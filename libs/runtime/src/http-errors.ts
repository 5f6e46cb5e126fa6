import type { ErrorKind } from '@ofp/contracts';

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
