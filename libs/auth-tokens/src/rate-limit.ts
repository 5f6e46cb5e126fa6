import type { Request, RequestHandler, Response } from 'express';
import { baseError } from '@ofp/contracts';
import type { TokenBucketLimiter } from './token-bucket.js';
import type { AuthContext } from './verifier.js';

export interface RateLimitOptions {
  limiter: TokenBucketLimiter;
  /**
   * The bucket a request draws from. Default: the verified client (`req.auth`, so mount it after
   * `requireBearer`), else the remote address.
   */
  key?: (req: Request, res: Response) => string;
}

/**
 * Per-client token-bucket rate limiting (API.md §3). Every response carries `RateLimit-Limit`,
 * `RateLimit-Remaining` and `RateLimit-Reset` (seconds until the bucket is full again), the fields of
 * draft-ietf-httpapi-ratelimit-headers; a request over the limit is a 429 envelope with `Retry-After`
 * (RFC 9110 §10.2.3, seconds until a token is available).
 */
export function rateLimit(options: RateLimitOptions): RequestHandler {
  const key = options.key ?? ((req: Request) => (req.auth ? clientBucket(req.auth) : `ip:${req.ip}`));
  return (req, res, next) => {
    res.set(admitRequest(options.limiter, key(req, res)));
    next();
  };
}

/** The bucket of a verified client. */
export function clientBucket(auth: AuthContext): string {
  return `client:${auth.clientId}`;
}

/**
 * Takes a token from bucket `key`: the RateLimit headers for the response, or a 429 error carrying
 * them and `Retry-After` (see {@link rateLimit}).
 */
export function admitRequest(limiter: TokenBucketLimiter, key: string): Record<string, string> {
  const decision = limiter.take(key);
  const headers = {
    'RateLimit-Limit': String(limiter.config.capacity),
    'RateLimit-Remaining': String(decision.remaining),
    'RateLimit-Reset': String(decision.resetSeconds),
  };
  if (!decision.allowed) {
    throw baseError('RateLimited', 'Too many requests', {
      ...headers,
      'Retry-After': String(decision.retryAfterSeconds),
    });
  }
  return headers;
}
