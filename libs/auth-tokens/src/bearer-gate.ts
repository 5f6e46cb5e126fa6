import type { RequestHandler } from 'express';
import { requireBearer, verifyBearer } from './middleware.js';
import { clientBucket, rateLimit, admitRequest } from './rate-limit.js';
import type { TokenBucketLimiter } from './token-bucket.js';
import type { AuthContext, TokenVerifier } from './verifier.js';

/**
 * What every `/v2` request passes first: its bearer token verified, then a token taken from its
 * client's rate-limit bucket. As express middleware, and as one call for handlers served outside
 * express (the api's reads).
 */
export class BearerGate {
  /** `requireBearer` then `rateLimit`: sets `req.auth` and the RateLimit headers. */
  readonly middleware: readonly RequestHandler[];

  constructor(
    private readonly verifier: TokenVerifier,
    private readonly limiter: TokenBucketLimiter,
  ) {
    this.middleware = [requireBearer(verifier), rateLimit({ limiter })];
  }

  /**
   * The verified token of an `Authorization` header and the RateLimit headers of the response. Throws
   * what the middleware would: 401, 429, or 503 when tokens cannot be verified.
   */
  async pass(
    authorization: string | undefined,
  ): Promise<{ auth: AuthContext; headers: Record<string, string> }> {
    const auth = await verifyBearer(this.verifier, authorization);
    return { auth, headers: admitRequest(this.limiter, clientBucket(auth)) };
  }
}
