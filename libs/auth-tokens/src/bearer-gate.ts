import { baseError } from '@ofp/contracts';
import { bearerChallenge, type Access, type Admission, type IncomingRequest } from '@ofp/http-api';
import { KeySourceUnavailableError } from './jwks.js';
import type { AuthMetrics } from './auth-metrics.js';
import type { DenyList } from './revocations.js';
import { DPOP_ALGORITHMS, DpopProofError, type DpopProofVerifier } from './dpop.js';
import { admitRequest, clientBucket } from './rate-limit.js';
import { isScope } from './scopes.js';
import type { TokenBucketLimiter } from './token-bucket.js';
import { TokenRejectedError, type AuthContext, type TokenVerifier } from './verifier.js';

/**
 * What the access step may do with an admitted token before the scope check: seed its organization.
 * Undefined when there is nothing to wait for (the organization seeded already, every request but its
 * first): no promise to await on the hot path.
 */
export type AdmittedHook = (auth: AuthContext) => Promise<void> | undefined;

/**
 * Bearer tokens a service issues and checks itself, beside the platform's JWTs: the webhook
 * dispatcher's portal sessions. Accepted only on the routes of the service that names them, so such
 * a token opens nothing else.
 */
export interface LocalTokens {
  /** Whether `token` is of this kind (by its form: a prefix no JWT has). */
  owns(token: string): boolean;
  /** Its principal, or a {@link TokenRejectedError} (unknown, expired). */
  verify(token: string): Promise<AuthContext>;
}

/** What a service needs to accept DPoP-bound tokens (RFC 9449 §7). */
export interface DpopResource {
  /**
   * The deployment's public base URL (`PUBLIC_URL`): a proof's `htu` is its origin and the request's
   * path, the URL as the client sent it, in front of any ingress.
   */
  publicUrl: string;
  proofs: DpopProofVerifier;
}

/**
 * What every bearer-token request passes (API.md §3, §7): its token verified, then a token taken
 * from its client's rate-limit bucket, then (for the api) its organization's seed records made sure
 * of. The pipeline checks the route's scopes after it.
 */
export class BearerGate {
  /** The origin of `dpop.publicUrl`, which every proof's `htu` names: parsed once, not per request. */
  private readonly dpopOrigin: string | undefined;

  constructor(
    private readonly verifier: TokenVerifier,
    private readonly limiter: TokenBucketLimiter,
    private readonly metrics?: AuthMetrics,
    private readonly dpop?: DpopResource,
    /**
     * The revocations the process knows (the verifier's deny-list): a service's own tokens are refused
     * once their client is disabled, as its JWTs are (API.md §7, within 5 s at every service).
     */
    private readonly revocations?: DenyList,
  ) {
    this.dpopOrigin = dpop && new URL(dpop.publicUrl).origin;
  }

  /**
   * The access of operations that need a token with one of `scopes` (none: any valid token). Route
   * specs name scopes as data, so one that is not a scope of API.md §7 fails here, when the routes
   * are bound. `local`: tokens of the service's own it accepts too, rate-limited and scope-checked
   * as the others.
   */
  access(scopes: readonly string[], admitted?: AdmittedHook, local?: LocalTokens): Access<AuthContext> {
    const unknown = scopes.filter((scope) => !isScope(scope));
    if (unknown.length > 0) throw new Error(`not a scope: ${unknown.join(', ')}`);
    const verifier: TokenVerifier = local
      ? {
          verify: (token) =>
            local.owns(token) ? this.verifyLocal(local, token) : this.verifier.verify(token),
        }
      : this.verifier;
    return {
      kind: 'bearer',
      scopes,
      authenticate: (request) => this.admit(request, verifier, admitted),
    };
  }

  private async verifyLocal(local: LocalTokens, token: string): Promise<AuthContext> {
    const auth = await local.verify(token);
    if (this.revocations?.isDenied(auth))
      throw new TokenRejectedError('The client of this token was disabled or its token revoked', 'revoked');
    return auth;
  }

  private async admit(
    request: IncomingRequest,
    verifier: TokenVerifier,
    admitted?: AdmittedHook,
  ): Promise<Admission<AuthContext>> {
    const auth = await verifyBearer(
      verifier,
      headerValue(request.headers.authorization),
      this.metrics,
      this.dpop && {
        proofs: this.dpop.proofs,
        method: request.method,
        url: `${this.dpopOrigin}${request.url.split('?')[0]}`,
        proof: request.headers.dpop,
      },
    );
    const limits = admitRequest(this.limiter, clientBucket(auth), this.metrics);
    // RFC 9449 §9: the nonce the client's next proof is to carry, when nonces are required.
    const nonce = auth.jkt === undefined ? undefined : this.dpop?.proofs.nonce();
    const headers = nonce === undefined ? limits : { ...limits, 'DPoP-Nonce': nonce };
    const admitting = admitted?.(auth);
    if (admitting) await admitting;
    return { principal: auth, scopes: auth.scopes, headers, organization: auth.orgId, client: auth.clientId };
  }
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

// RFC 6750 §2.1 and RFC 9449 §7.1: `Bearer` or `DPoP` (any case), one or more spaces, a token68.
const AUTHORIZATION = /^(?:Bearer|DPoP) +([A-Za-z0-9\-._~+/]+=*)$/i;
const SCHEME = /^(Bearer|DPoP)(?: |$)/i;

/** The request a DPoP proof must be for, and what checks it. */
export interface DpopCheck {
  proofs: DpopProofVerifier;
  method: string;
  /** The request's URL as the client sees it, without its query. */
  url: string;
  /** The `DPoP` header's values. */
  proof: string | string[] | undefined;
}

/** RFC 9449 §7.1: a `DPoP` challenge, with the proof algorithms accepted. */
function dpopChallenge(code: string, description: string): string {
  return `DPoP error="${code}", error_description="${description}", algs="${DPOP_ALGORITHMS.join(' ')}"`;
}

/**
 * Verifies the access token of an `Authorization` header: a bearer token with the `Bearer` scheme
 * (RFC 6750), a DPoP-bound one with the `DPoP` scheme and a proof of its key for this request (RFC 9449
 * §7: `ath` its hash, the key its `cnf.jkt`), which `dpop` checks; without `dpop` the DPoP scheme is
 * refused. Failures throw 401 errors with the scheme's challenge (API.md §3); an unreachable issuer is
 * a 503.
 */
export async function verifyBearer(
  verifier: TokenVerifier,
  header: string | undefined,
  metrics?: AuthMetrics,
  dpop?: DpopCheck,
): Promise<AuthContext> {
  const scheme = header === undefined ? undefined : SCHEME.exec(header)?.[1]?.toLowerCase();
  if (scheme === undefined) {
    metrics?.rejected('missing');
    throw baseError('Unauthenticated', 'An access token is required', {
      'WWW-Authenticate': bearerChallenge(),
    });
  }
  const token = AUTHORIZATION.exec(header!)?.[1];
  let auth: AuthContext;
  try {
    if (token === undefined) throw new TokenRejectedError('The access token is malformed', 'malformed');
    auth = await verifier.verify(token);
  } catch (error) {
    if (error instanceof KeySourceUnavailableError) {
      metrics?.rejected('unavailable');
      throw baseError('Unavailable', 'Access tokens cannot be verified right now');
    }
    if (!(error instanceof TokenRejectedError)) throw error;
    metrics?.rejected(error.reason);
    throw baseError('Unauthenticated', error.description, {
      'WWW-Authenticate':
        scheme === 'dpop'
          ? dpopChallenge('invalid_token', error.description)
          : bearerChallenge({ code: 'invalid_token', description: error.description }),
    });
  }
  if (scheme === 'bearer' && auth.jkt === undefined) return auth;
  const refuse = (
    code: 'invalid_token' | 'invalid_dpop_proof' | 'use_dpop_nonce',
    description: string,
    nonce?: string,
  ): never => {
    metrics?.rejected('dpop');
    throw baseError('Unauthenticated', description, {
      'WWW-Authenticate': dpopChallenge(code, description),
      ...(nonce === undefined ? {} : { 'DPoP-Nonce': nonce }),
    });
  };
  // RFC 9449 §7.2: a bound token presented as a bearer token is refused, or its binding would be for nothing.
  if (scheme === 'bearer')
    return refuse(
      'invalid_token',
      'The access token is DPoP-bound: present it with the DPoP scheme and a proof',
    );
  if (dpop === undefined) return refuse('invalid_token', 'This service does not accept DPoP-bound tokens');
  if (auth.jkt === undefined)
    return refuse('invalid_token', 'The access token is not DPoP-bound: present it with the Bearer scheme');
  let jkt: string;
  try {
    ({ jkt } = await dpop.proofs.verify(dpop.proof, {
      method: dpop.method,
      url: dpop.url,
      accessToken: token,
    }));
  } catch (error) {
    if (!(error instanceof DpopProofError)) throw error;
    return refuse(error.code, error.description, error.nonce);
  }
  if (jkt !== auth.jkt)
    return refuse(
      'invalid_dpop_proof',
      'The DPoP proof is signed by another key than the access token is bound to',
    );
  return auth;
}
