import { baseError } from '@ofp/contracts';
import { bearerChallenge, type Access, type Admission, type IncomingRequest } from '@ofp/runtime';
import { KeySourceUnavailableError } from './jwks.js';
import type { AuthMetrics } from './auth-metrics.js';
import { admitRequest, clientBucket } from './rate-limit.js';
import { isScope } from './scopes.js';
import type { TokenBucketLimiter } from './token-bucket.js';
import { TokenRejectedError, type AuthContext, type TokenVerifier } from './verifier.js';

/** What the access step may do with an admitted token before the scope check: seed its organization. */
export type AdmittedHook = (auth: AuthContext) => Promise<void>;

/**
 * What every bearer-token request passes (API.md §3, §7): its token verified, then a token taken
 * from its client's rate-limit bucket, then (for the api) its organization's seed records made sure
 * of. The pipeline checks the route's scopes after it.
 */
export class BearerGate {
  constructor(
    private readonly verifier: TokenVerifier,
    private readonly limiter: TokenBucketLimiter,
    private readonly metrics?: AuthMetrics,
  ) {}

  /**
   * The access of operations that need a token with one of `scopes` (none: any valid token). Route
   * specs name scopes as data, so one that is not a scope of API.md §7 fails here, when the routes
   * are bound.
   */
  access(scopes: readonly string[], admitted?: AdmittedHook): Access<AuthContext> {
    const unknown = scopes.filter((scope) => !isScope(scope));
    if (unknown.length > 0) throw new Error(`not a scope: ${unknown.join(', ')}`);
    return {
      kind: 'bearer',
      scopes,
      authenticate: (request) => this.admit(request, admitted),
    };
  }

  private async admit(request: IncomingRequest, admitted?: AdmittedHook): Promise<Admission<AuthContext>> {
    const auth = await verifyBearer(this.verifier, headerValue(request.headers.authorization), this.metrics);
    const headers = admitRequest(this.limiter, clientBucket(auth), this.metrics);
    await admitted?.(auth);
    return { principal: auth, scopes: auth.scopes, headers, organization: auth.orgId, client: auth.clientId };
  }
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

// RFC 6750 §2.1: `Bearer` (any case), one or more spaces, a token68.
const AUTHORIZATION = /^Bearer +([A-Za-z0-9\-._~+/]+=*)$/i;
const SCHEME = /^Bearer(?: |$)/i;

/**
 * Verifies the bearer token of an `Authorization` header. Failures throw 401 errors with the RFC 6750
 * §3 challenge (API.md §3); an unreachable issuer is a 503.
 */
export async function verifyBearer(
  verifier: TokenVerifier,
  header: string | undefined,
  metrics?: AuthMetrics,
): Promise<AuthContext> {
  if (header === undefined || !SCHEME.test(header)) {
    metrics?.rejected('missing');
    throw baseError('Unauthenticated', 'An access token is required', {
      'WWW-Authenticate': bearerChallenge(),
    });
  }
  const token = AUTHORIZATION.exec(header)?.[1];
  try {
    if (token === undefined) throw new TokenRejectedError('The access token is malformed', 'malformed');
    return await verifier.verify(token);
  } catch (error) {
    if (error instanceof KeySourceUnavailableError) {
      metrics?.rejected('unavailable');
      throw baseError('Unavailable', 'Access tokens cannot be verified right now');
    }
    if (!(error instanceof TokenRejectedError)) throw error;
    metrics?.rejected(error.reason);
    throw baseError('Unauthenticated', error.description, {
      'WWW-Authenticate': bearerChallenge({ code: 'invalid_token', description: error.description }),
    });
  }
}
