import {
  admitRequest,
  epochSeconds,
  type AuthMetrics,
  type Clock,
  type Scope,
  type TokenBucketLimiter,
} from '@ofp/auth-tokens';
import { prepared, type Pool } from '@ofp/runtime';
import { type Access } from '@ofp/http-api';
import { createLocalJWKSet, decodeJwt, errors, jwtVerify, type JSONWebKeySet } from 'jose';
import { digestSecret, secretMatches } from '../secrets.js';
import { OAuthError } from './errors.js';
import type { FailedAuthenticationLimits } from './failed-authentication.js';
import { parseForm, type OAuthParams } from './form.js';

/** A registered client, as the OAuth endpoints need it. */
export interface Client {
  id: string;
  organizationId: number;
  /** Null for a client of the client-credentials grant alone. */
  redirectUri: string | null;
  scopes: Scope[];
  /** RFC 9449 §5.2: it gets tokens only with a DPoP proof. */
  dpopBoundAccessTokens: boolean;
}

/** Credentials a client presented, and how (RFC 6749 §2.3.1, RFC 7523 §2.2). */
export type PresentedCredentials =
  | { method: 'client_secret_basic' | 'client_secret_post'; clientId: string; clientSecret: string }
  | { method: 'private_key_jwt'; clientId: string; assertion: string }
  | { method: 'none' };

/** RFC 7523 §2.2's `client_assertion_type`. */
export const JWT_BEARER_ASSERTION = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

/** The algorithms a client may sign its assertions with (the metadata's `..._signing_alg_values_supported`). */
export const ASSERTION_ALGORITHMS = ['RS256', 'PS256', 'ES256', 'EdDSA'];

/**
 * The longest an assertion may live (from now to its `exp`): its `jti` is kept until then, so a far
 * expiry would keep it for ever. Clients make them for one request (openid-client: 60 s).
 */
const MAX_ASSERTION_LIFETIME_SECONDS = 5 * 60;

/** How far the client's clock may be from ours, for an assertion's `exp`, `nbf` and `iat`. */
const ASSERTION_CLOCK_TOLERANCE_SECONDS = 30;

/** RFC 6749 §5.2: an `invalid_client` after Basic authentication must carry this challenge. */
export const BASIC_CHALLENGE = { 'WWW-Authenticate': 'Basic realm="oauth", charset="UTF-8"' } as const;

/**
 * Reads client credentials from HTTP Basic or from the body (RFC 6749 §2.3.1). Using both is an
 * `invalid_request` (§2.3: one method per request). Basic credentials are form-urlencoded before base64
 * encoding (§2.3.1), so they are decoded twice.
 */
export function presentedCredentials(
  authorization: string | undefined,
  form: OAuthParams,
): PresentedCredentials {
  const bodySecret = form.get('client_secret');
  const assertionType = form.get('client_assertion_type');
  const assertion = form.get('client_assertion');
  if (assertionType !== undefined || assertion !== undefined) {
    if (bodySecret !== undefined || (authorization !== undefined && /^Basic /i.test(authorization))) {
      throw new OAuthError('invalid_request', 'Use one client authentication method, not two');
    }
    return assertionCredentials(assertionType, assertion, form.get('client_id'));
  }
  if (authorization !== undefined && /^Basic /i.test(authorization)) {
    if (bodySecret !== undefined) {
      throw new OAuthError('invalid_request', 'Use one client authentication method, not two');
    }
    const decoded = Buffer.from(authorization.slice(6).trim(), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    const basicFailure = new OAuthError(
      'invalid_client',
      'Malformed Basic credentials',
      401,
      BASIC_CHALLENGE,
    );
    if (colon < 0) throw basicFailure;
    let clientId: string;
    let clientSecret: string;
    try {
      clientId = formDecode(decoded.slice(0, colon));
      clientSecret = formDecode(decoded.slice(colon + 1));
    } catch {
      throw basicFailure;
    }
    const bodyId = form.get('client_id');
    if (bodyId !== undefined && bodyId !== clientId) {
      throw new OAuthError('invalid_request', 'client_id differs from the Basic credentials');
    }
    return { method: 'client_secret_basic', clientId, clientSecret };
  }
  const clientId = form.get('client_id');
  if (clientId !== undefined && bodySecret !== undefined) {
    return { method: 'client_secret_post', clientId, clientSecret: bodySecret };
  }
  return { method: 'none' };
}

/**
 * RFC 7523 §2.2, §3: the assertion names its client in `sub` (and `iss`); a `client_id` beside it must
 * be the same. Only decoded here: {@link verifyClient} verifies it with the client's keys.
 */
function assertionCredentials(
  type: string | undefined,
  assertion: string | undefined,
  formClientId: string | undefined,
): PresentedCredentials {
  if (type !== JWT_BEARER_ASSERTION) {
    throw new OAuthError('invalid_request', `client_assertion_type must be ${JWT_BEARER_ASSERTION}`);
  }
  if (assertion === undefined) throw new OAuthError('invalid_request', 'client_assertion is required');
  let sub: unknown;
  try {
    ({ sub } = decodeJwt(assertion));
  } catch {
    throw new OAuthError('invalid_client', 'The client assertion is not a JWT', 401);
  }
  if (typeof sub !== 'string' || sub === '') {
    throw new OAuthError('invalid_client', 'The client assertion names no client (sub)', 401);
  }
  if (formClientId !== undefined && formClientId !== sub) {
    throw new OAuthError('invalid_request', 'client_id differs from the client assertion');
  }
  return { method: 'private_key_jwt', clientId: sub, assertion };
}

function formDecode(value: string): string {
  return decodeURIComponent(value.replace(/\+/g, ' '));
}

// Compared against when the client does not exist, so that an unknown id costs the same as a wrong secret.
const NO_SECRET = digestSecret('');

/**
 * The credentials were right but the client is disabled: not a failed authentication (nothing was
 * guessed), and said only to whoever holds the secret.
 */
class ClientDisabledError extends OAuthError {}

/** What verifying a client assertion needs: the audiences it may name (RFC 7523 §3 item 3) and the time. */
export interface AssertionAudience {
  /** The issuer identifier and the token endpoint's URL. */
  audiences: readonly string[];
  clock: Clock;
}

/**
 * Looks the client up and checks its secret, or for a client registered with a JWKS its assertion
 * (RFC 7523 §3: signed by one of its keys, `iss` = `sub` = the client, `aud` the issuer or the token
 * endpoint, `exp` within {@link MAX_ASSERTION_LIFETIME_SECONDS}, a `jti` never used before). Each client
 * authenticates the one way it was registered for; any failure is the same `invalid_client`.
 */
export async function verifyClient(
  pool: Pool,
  credentials: PresentedCredentials,
  assertions: AssertionAudience,
): Promise<Client> {
  const challenge = credentials.method === 'client_secret_basic' ? BASIC_CHALLENGE : {};
  if (credentials.method === 'none') {
    throw new OAuthError('invalid_client', 'Client authentication is required', 401, challenge);
  }
  const { rows } = await pool.query<{
    id: string;
    organization_id: number;
    redirect_uri: string | null;
    scopes: Scope[];
    secret_hash: Buffer | null;
    jwks: JSONWebKeySet | null;
    dpop_bound_access_tokens: boolean;
    disabled: boolean;
  }>(
    prepared(
      `SELECT id, organization_id, redirect_uri, scopes, secret_hash, jwks, dpop_bound_access_tokens,
              disabled_at IS NOT NULL AS disabled
       FROM auth.clients WHERE id = $1`,
      [credentials.clientId],
    ),
  );
  const row = rows[0];
  const failed = () => new OAuthError('invalid_client', 'Client authentication failed', 401, challenge);
  if (credentials.method === 'private_key_jwt') {
    if (row?.jwks == null) throw failed();
    await verifyAssertion(pool, credentials, row.jwks, assertions);
  } else {
    const matches = secretMatches(credentials.clientSecret, row?.secret_hash ?? NO_SECRET);
    if (row?.secret_hash == null || !matches) throw failed();
  }
  if (row.disabled) throw new ClientDisabledError('invalid_client', 'The client is disabled', 401, challenge);
  return {
    id: row.id,
    organizationId: row.organization_id,
    redirectUri: row.redirect_uri,
    scopes: row.scopes,
    dpopBoundAccessTokens: row.dpop_bound_access_tokens,
  };
}

async function verifyAssertion(
  pool: Pool,
  credentials: { clientId: string; assertion: string },
  jwks: JSONWebKeySet,
  { audiences, clock }: AssertionAudience,
): Promise<void> {
  const now = clock();
  let exp: number;
  let jti: string;
  try {
    const { payload } = await jwtVerify(credentials.assertion, createLocalJWKSet(jwks), {
      algorithms: ASSERTION_ALGORITHMS,
      issuer: credentials.clientId,
      subject: credentials.clientId,
      audience: [...audiences],
      requiredClaims: ['exp', 'jti'],
      currentDate: now,
      clockTolerance: ASSERTION_CLOCK_TOLERANCE_SECONDS,
    });
    if (typeof payload.jti !== 'string' || payload.jti === '') throw new Error('jti is not a string');
    // jose checks a future `iat` only with maxTokenAge, which would make `iat` required where RFC 7523
    // §3 lets it out: an assertion made after now (beyond the clock tolerance) is refused here.
    if (payload.iat !== undefined && payload.iat > epochSeconds(now) + ASSERTION_CLOCK_TOLERANCE_SECONDS)
      throw new errors.JWTClaimValidationFailed('iat is in the future', payload, 'iat', 'in the future');
    exp = payload.exp!;
    jti = payload.jti;
  } catch (error) {
    throw new OAuthError(
      'invalid_client',
      `The client assertion is invalid: ${assertionProblem(error)}`,
      401,
    );
  }
  if (exp - epochSeconds(now) > MAX_ASSERTION_LIFETIME_SECONDS) {
    throw new OAuthError(
      'invalid_client',
      `The client assertion must expire within ${MAX_ASSERTION_LIFETIME_SECONDS} s`,
      401,
    );
  }
  const { rowCount } = await pool.query(
    prepared(
      `INSERT INTO auth.client_assertions (client_id, jti, expires_at) VALUES ($1, $2, $3)
       ON CONFLICT DO NOTHING`,
      [credentials.clientId, jti, new Date(exp * 1000)],
    ),
  );
  if (rowCount !== 1) throw new OAuthError('invalid_client', 'The client assertion was used before', 401);
}

/** Why an assertion was refused, in words safe to send back (never the keys or the token). */
function assertionProblem(error: unknown): string {
  if (error instanceof errors.JWTExpired) return 'expired';
  if (error instanceof errors.JWTClaimValidationFailed) return `${error.claim} (${error.reason})`;
  if (error instanceof errors.JOSEAlgNotAllowed)
    return `alg must be one of ${ASSERTION_ALGORITHMS.join(', ')}`;
  if (error instanceof errors.JWKSNoMatchingKey) return 'signed by no key of the client';
  if (error instanceof errors.JWSSignatureVerificationFailed) return 'signature';
  if (error instanceof Error && error.message === 'jti is not a string') return 'jti';
  return 'malformed';
}

/** A client-authenticated OAuth request: its client, its form's parameters and its DPoP proof header. */
export interface ClientRequest {
  readonly client: Client;
  readonly form: OAuthParams;
  /** The `DPoP` header's values (RFC 9449 §4.1), as received. */
  readonly dpop: string | string[] | undefined;
}

/**
 * The access of the client-authenticated OAuth endpoints (token, revoke, introspect): the form parsed,
 * the client authenticated (RFC 6749 §2.3.1) within the limits on failures (API.md §12), then a token
 * taken from the authenticated client's rate-limit bucket (keyed by a client_id before authentication,
 * anyone could drain another client's).
 */
export function clientAccess(
  pool: Pool,
  limiter: TokenBucketLimiter,
  failures: FailedAuthenticationLimits,
  assertions: AssertionAudience,
  metrics?: AuthMetrics,
): Access<ClientRequest> {
  return {
    kind: 'client',
    async authenticate(request) {
      const form = parseForm(single(request.headers['content-type']), request.body);
      const address = request.remoteAddress;
      let credentials: PresentedCredentials | undefined;
      let client: Client;
      try {
        credentials = presentedCredentials(single(request.headers.authorization), form);
        const clientId = credentials.method === 'none' ? undefined : credentials.clientId;
        failures.admit(clientId ?? form.get('client_id'), address);
        client = await verifyClient(pool, credentials, assertions);
      } catch (error) {
        if (
          !(error instanceof OAuthError) ||
          error.code !== 'invalid_client' ||
          error instanceof ClientDisabledError
        )
          throw error;
        const clientId = credentials?.method === 'none' ? undefined : credentials?.clientId;
        throw failures.failed(error, clientId ?? form.get('client_id'), address);
      }
      failures.succeeded(client.id, address);
      return {
        principal: { client, form, dpop: request.headers.dpop },
        scopes: client.scopes,
        headers: admitRequest(limiter, `client:${client.id}`, metrics),
        organization: client.organizationId,
        client: client.id,
      };
    },
  };
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
