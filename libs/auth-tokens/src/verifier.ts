import { errors, jwtVerify, type JWTVerifyGetKey } from 'jose';
import { LRUCache } from 'lru-cache';
import { z } from 'zod';
import { epochSeconds, type Clock } from './clock.js';
import { KeySourceUnavailableError, type KeySource } from './jwks.js';
import type { DenyList } from './revocations.js';
import { isScope, type Scope } from './scopes.js';

/** Who a verified access token speaks for (API.md §7). */
export interface AuthContext {
  /** `client_id` (RFC 9068 §2.2, `sub` as well): the OAuth client the token was issued to. */
  clientId: string;
  /** `org`: the organization the client belongs to; every record it touches belongs to it. */
  orgId: number;
  /** `scope`, restricted to the scopes this platform knows. */
  scopes: readonly Scope[];
  /**
   * `gid`: the grant (authorization) the token was issued under; revoking it revokes the token. Absent
   * for a client-credentials token: nothing is stored per such token (API.md §7), and it is revoked by
   * its `jti` or with its client.
   */
  grantId?: string;
  /** `jti`. */
  tokenId: string;
  /** `iat`. */
  issuedAt: Date;
  /** `exp`. */
  expiresAt: Date;
  /**
   * `cnf.jkt` (RFC 9449 §6.1): the thumbprint of the DPoP key the token is bound to; such a token is only
   * accepted with a proof signed by that key. Absent for a bearer token.
   */
  jkt?: string;
}

/** Why a token was refused, for metrics: a small fixed set (never the token or its client). */
export const REJECTION_REASONS = [
  'malformed',
  'type',
  'algorithm',
  'unknown_key',
  'expired',
  'not_yet_valid',
  'issuer',
  'audience',
  'signature',
  'claims',
  'revoked',
  'invalid',
  'dpop',
] as const;
export type RejectionReason = (typeof REJECTION_REASONS)[number];

/** The token is not acceptable; `description` is safe to send back (RFC 6750 §3 `error_description`). */
export class TokenRejectedError extends Error {
  override readonly name = 'TokenRejectedError';
  constructor(
    readonly description: string,
    readonly reason: RejectionReason,
  ) {
    super(description);
  }
}

export interface TokenVerifier {
  /**
   * Resolves with the token's claims, or rejects with {@link TokenRejectedError} (or
   * `KeySourceUnavailableError` when the issuer's keys cannot be fetched).
   */
  verify(token: string): Promise<AuthContext>;
}

export interface TokenVerifierOptions {
  /** The expected `iss`: the auth service's public base URL (API.md §7). */
  issuer: string;
  /**
   * The expected `aud` (RFC 9068 §4): the deployment's API resource, which API.md §7 makes its public
   * base URL, the issuer's value too. Default: `issuer`.
   */
  audience?: string;
  keys: KeySource;
  denyList: DenyList;
  clock: Clock;
  /** Leeway for `exp` and `nbf` against clock skew between hosts (default 30 s). */
  clockToleranceSeconds?: number;
}

/** How many verified tokens a process remembers (the least recently used forgotten first). */
const VERIFIED_TOKENS_KEPT = 10_000;

/** The only algorithm accepted: pinning it defeats `alg: none` and HS256-with-the-public-key forgeries. */
const ALGORITHM = 'RS256';

/**
 * RFC 9068 §4: an access token's `typ` is `at+jwt` (jose also accepts the full media type, in any case:
 * RFC 7515 §4.1.9). It keeps an ID token or any other JWT signed by the same key from being accepted as
 * an access token.
 */
const ACCESS_TOKEN_TYPE = 'at+jwt';

/** RFC 9068 §2.2's claims that jose checks for presence (`iss` and `aud` it checks against the expected values). */
const REQUIRED_CLAIMS = ['sub', 'client_id', 'jti', 'iat', 'exp'];

const claimsSchema = z.object({
  client_id: z.string().min(1),
  org: z.number().int().positive(),
  scope: z.string(),
  gid: z.string().min(1).optional(),
  jti: z.string().min(1),
  iat: z.number(),
  exp: z.number(),
  cnf: z.looseObject({ jkt: z.string().min(1) }).optional(),
});

/**
 * Verifies access tokens locally (no call to the auth service per request) with jose's `jwtVerify`:
 * RS256 only, a `kid` the issuer publishes, the signature, RFC 9068's `typ: at+jwt`, `iss`, `aud`,
 * `client_id`, `exp` (required) and `nbf`, the claims this platform relies on, and the deny-list of
 * revoked grants.
 */
export function createTokenVerifier(options: TokenVerifierOptions): TokenVerifier {
  const clockTolerance = options.clockToleranceSeconds ?? 30;
  const audience = options.audience ?? options.issuer;
  // A client sends the same token with every request for up to 3 hours: the signature and claims of
  // a token once verified are remembered (what can change, time and revocation, is checked on every
  // use), which saves an RSA verification per request.
  const verified = new LRUCache<string, AuthContext>({ max: VERIFIED_TOKENS_KEPT });
  return {
    async verify(token) {
      const known = verified.get(token);
      if (known !== undefined) {
        if (epochSeconds(options.clock()) <= epochSeconds(known.expiresAt) + clockTolerance) {
          if (options.denyList.isDenied(known))
            throw new TokenRejectedError('The access token was revoked', 'revoked');
          return known;
        }
        verified.delete(token);
      }
      const context = await verifyToken(token);
      verified.set(token, context);
      return context;
    },
  };

  async function verifyToken(token: string): Promise<AuthContext> {
    let payload: unknown;
    try {
      ({ payload } = await jwtVerify(token, keyNamedBy(options.keys), {
        algorithms: [ALGORITHM],
        typ: ACCESS_TOKEN_TYPE,
        issuer: options.issuer,
        audience,
        requiredClaims: REQUIRED_CLAIMS,
        currentDate: options.clock(),
        clockTolerance,
      }));
    } catch (error) {
      throw rejection(error);
    }
    const claims = claimsSchema.safeParse(payload);
    if (!claims.success) throw new TokenRejectedError('The access token lacks required claims', 'claims');
    const { client_id, org, scope, gid, jti, iat, exp, cnf } = claims.data;
    const context: AuthContext = {
      clientId: client_id,
      orgId: org,
      scopes: scope.split(' ').filter(isScope),
      ...(gid === undefined ? {} : { grantId: gid }),
      tokenId: jti,
      issuedAt: new Date(iat * 1000),
      expiresAt: new Date(exp * 1000),
      ...(cnf === undefined ? {} : { jkt: cnf.jkt }),
    };
    if (options.denyList.isDenied(context))
      throw new TokenRejectedError('The access token was revoked', 'revoked');
    return context;
  }
}

/** The key source, for tokens that name their key: a token without a `kid` is refused before any lookup. */
function keyNamedBy(keys: KeySource): JWTVerifyGetKey {
  return (header, token) => {
    if (typeof header.kid !== 'string')
      throw new TokenRejectedError('The access token names no signing key', 'unknown_key');
    return keys(header, token);
  };
}

function rejection(error: unknown): Error {
  if (error instanceof TokenRejectedError || error instanceof KeySourceUnavailableError) return error;
  if (error instanceof errors.JWTExpired)
    return new TokenRejectedError('The access token expired', 'expired');
  if (error instanceof errors.JWTClaimValidationFailed) {
    switch (error.claim) {
      case 'typ':
        return new TokenRejectedError('The token is not an access token (typ at+jwt)', 'type');
      case 'iss':
        return new TokenRejectedError('The access token has another issuer', 'issuer');
      case 'aud':
        return new TokenRejectedError('The access token is meant for another audience', 'audience');
      case 'nbf':
        return new TokenRejectedError('The access token is not valid yet', 'not_yet_valid');
      default:
        return new TokenRejectedError('The access token lacks required claims', 'claims');
    }
  }
  if (error instanceof errors.JOSEAlgNotAllowed)
    return new TokenRejectedError('The access token is not signed with RS256', 'algorithm');
  if (error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys)
    return new TokenRejectedError('The access token is signed with an unknown key', 'unknown_key');
  if (error instanceof errors.JWSSignatureVerificationFailed)
    return new TokenRejectedError('The access token signature is invalid', 'signature');
  if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid)
    return new TokenRejectedError('The access token is malformed', 'malformed');
  return new TokenRejectedError('The access token is invalid', 'invalid');
}
