import type { WEBHOOK_ATTEMPT_ERROR_KINDS } from '../models.js';

/** Why an attempt failed (the registry's `attempt_log.error_kind` values). */
export type AttemptErrorKind = (typeof WEBHOOK_ATTEMPT_ERROR_KINDS)[number];

/** One try of a delivery: an element of its `attempt_log`. */
export interface AttemptRecord {
  readonly startedAt: Date;
  readonly durationMs: number;
  /** The response status, or null when no response came. */
  readonly statusCode: number | null;
  /** Null when the endpoint answered 2xx within the request timeout: the attempt succeeded. */
  readonly errorKind: AttemptErrorKind | null;
  readonly error: string | null;
  /** The start of the response body (bounded), for the subscriber's own diagnosis. */
  readonly responseExcerpt: string | null;
  /** The response's `Retry-After` header, when it had one. */
  readonly retryAfter: string | null;
}
