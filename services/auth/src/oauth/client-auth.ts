import { admitRequest, type AuthMetrics, type Scope, type TokenBucketLimiter } from '@ofp/auth-tokens';
import { prepared, type Access, type Pool } from '@ofp/runtime';
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
}

/** Credentials a client presented, and how (RFC 6749 §2.3.1). */
export type PresentedCredentials =
  | { method: 'client_secret_basic' | 'client_secret_post'; clientId: string; clientSecret: string }
  | { method: 'none' };

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

/** Looks the client up and checks its secret; any failure is the same `invalid_client`. */
export async function verifyClient(pool: Pool, credentials: PresentedCredentials): Promise<Client> {
  const challenge = credentials.method === 'client_secret_basic' ? BASIC_CHALLENGE : {};
  if (credentials.method === 'none') {
    throw new OAuthError('invalid_client', 'Client authentication is required', 401, challenge);
  }
  const { rows } = await pool.query<{
    id: string;
    organization_id: number;
    redirect_uri: string | null;
    scopes: Scope[];
    secret_hash: Buffer;
    disabled: boolean;
  }>(
    prepared(
      `SELECT id, organization_id, redirect_uri, scopes, secret_hash, disabled_at IS NOT NULL AS disabled
       FROM auth.clients WHERE id = $1`,
      [credentials.clientId],
    ),
  );
  const row = rows[0];
  const matches = secretMatches(credentials.clientSecret, row?.secret_hash ?? NO_SECRET);
  if (row === undefined || !matches) {
    throw new OAuthError('invalid_client', 'Client authentication failed', 401, challenge);
  }
  if (row.disabled) throw new ClientDisabledError('invalid_client', 'The client is disabled', 401, challenge);
  return {
    id: row.id,
    organizationId: row.organization_id,
    redirectUri: row.redirect_uri,
    scopes: row.scopes,
  };
}

/** A client-authenticated OAuth request: its client and its form's parameters. */
export interface ClientRequest {
  readonly client: Client;
  readonly form: OAuthParams;
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
        client = await verifyClient(pool, credentials);
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
        principal: { client, form },
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
