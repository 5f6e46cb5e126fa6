import { baseError } from '@ofp/contracts';
import type { AuthMetrics } from './auth-metrics.js';
import type { TokenBucketLimiter } from './token-bucket.js';
import type { AuthContext } from './verifier.js';

/** The bucket of a verified client. */
export function clientBucket(auth: AuthContext): string {
  return `client:${auth.clientId}`;
}

/**
 * Takes a token from bucket `key` (per-client token-bucket rate limiting, API.md §3): the headers
 * every response carries, `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` (seconds until
 * the bucket is full again; the fields of draft-ietf-httpapi-ratelimit-headers), or a request over the
 * limit's 429 error carrying them and `Retry-After` (RFC 9110 §10.2.3, seconds until a token is
 * available).
 */
export function admitRequest(
  limiter: TokenBucketLimiter,
  key: string,
  metrics?: AuthMetrics,
): Record<string, string> {
  const decision = limiter.take(key);
  const headers = {
    'RateLimit-Limit': String(limiter.config.capacity),
    'RateLimit-Remaining': String(decision.remaining),
    'RateLimit-Reset': String(decision.resetSeconds),
  };
  if (!decision.allowed) {
    metrics?.rateLimited();
    throw baseError('RateLimited', 'Too many requests', {
      ...headers,
      'Retry-After': String(decision.retryAfterSeconds),
    });
  }
  return headers;
}
