import { randomUUID } from 'node:crypto';
import type { Clock, Scope } from '@ofp/auth-tokens';
import type { Pool } from '@ofp/runtime';
import type { Reply } from '@ofp/http-api';
import { digestSecret, newSecret } from '../secrets.js';
import { OAuthError } from './errors.js';
import { singleValued } from './form.js';
import { isS256Challenge } from './pkce.js';
import { narrowScopes } from './scopes.js';

/** API.md §7: codes live 10 minutes (RFC 6749 §4.1.2 recommends at most 10). */
export const AUTHORIZATION_CODE_TTL_MS = 10 * 60_000;

export interface AuthorizeEndpointDeps {
  pool: Pool;
  clock: Clock;
  issuer: string;
}

/** An error that goes back to the client on its redirect URI (RFC 6749 §4.1.2.1). */
class RedirectableError extends Error {
  constructor(
    readonly code: 'invalid_request' | 'unsupported_response_type' | 'invalid_scope',
    readonly description: string,
  ) {
    super(description);
  }
}

/**
 * `GET /oauth/authorize` (RFC 6749 §4.1.1): the authorization code flow with optional PKCE, S256 only
 * (RFC 7636). There is no end-user login: the client's organization grants access, so a valid request
 * is answered at once with a code on the registered redirect URI.
 */
export function authorizeEndpoint(deps: AuthorizeEndpointDeps): (url: string) => Promise<Reply> {
  return async (url) => {
    const query = new URL(url, 'http://request.invalid').searchParams;
    const values = (name: string) => query.getAll(name).filter((v) => v !== '');

    // RFC 6749 §4.1.2.1: with a missing or unknown client, or a redirect URI other than the registered
    // one, the error goes to the user agent and never to a redirect.
    const [clientId, ...moreClientIds] = values('client_id');
    const client =
      clientId === undefined || moreClientIds.length > 0 ? undefined : await findClient(deps.pool, clientId);
    if (client === undefined) throw new OAuthError('invalid_client', 'Invalid client_id', 401);
    if (client.redirectUri === null) {
      throw new OAuthError(
        'invalid_request',
        'This client has no registered redirect_uri: it uses the client_credentials grant only',
      );
    }
    const redirectUris = values('redirect_uri');
    if (
      redirectUris.length > 1 ||
      (redirectUris[0] !== undefined && redirectUris[0] !== client.redirectUri)
    ) {
      throw new OAuthError('invalid_request', 'The redirect_uri is not the one registered for this client');
    }

    const [state, ...moreStates] = values('state');
    const target = new URL(client.redirectUri);
    // RFC 6749 §4.1.2: state is passed back unchanged; RFC 9207 §2: iss names the issuer.
    if (state !== undefined && moreStates.length === 0) target.searchParams.set('state', state);
    target.searchParams.set('iss', deps.issuer);
    try {
      const code = await issueCode(deps, client, query, redirectUris[0]);
      target.searchParams.set('code', code);
    } catch (error) {
      if (!(error instanceof RedirectableError || error instanceof OAuthError)) throw error;
      target.searchParams.set('error', error.code);
      target.searchParams.set('error_description', error.description);
    }
    return { status: 302, headers: { 'Cache-Control': 'no-store', Location: target.href } };
  };
}

interface RegisteredClient {
  id: string;
  redirectUri: string | null;
  scopes: Scope[];
}

/** A client that may authorize: a disabled one is as unknown as one that never was. */
async function findClient(pool: Pool, clientId: string): Promise<RegisteredClient | undefined> {
  const { rows } = await pool.query<{ id: string; redirect_uri: string | null; scopes: Scope[] }>(
    'SELECT id, redirect_uri, scopes FROM auth.clients WHERE id = $1 AND disabled_at IS NULL',
    [clientId],
  );
  const row = rows[0];
  return row === undefined ? undefined : { id: row.id, redirectUri: row.redirect_uri, scopes: row.scopes };
}

async function issueCode(
  deps: AuthorizeEndpointDeps,
  client: RegisteredClient,
  query: URLSearchParams,
  redirectUri: string | undefined,
): Promise<string> {
  const params = singleValued(query);
  const responseType = params.get('response_type');
  if (responseType === undefined) throw new RedirectableError('invalid_request', 'response_type is required');
  if (responseType !== 'code') {
    throw new RedirectableError('unsupported_response_type', 'Only response_type=code is supported');
  }
  const challenge = params.get('code_challenge');
  const method = params.get('code_challenge_method');
  if (challenge === undefined && method !== undefined) {
    throw new RedirectableError('invalid_request', 'code_challenge_method without code_challenge');
  }
  if (challenge !== undefined) {
    // RFC 7636 §4.3: a missing method means plain, which this server does not support.
    if (method !== 'S256')
      throw new RedirectableError('invalid_request', 'code_challenge_method must be S256');
    if (!isS256Challenge(challenge))
      throw new RedirectableError('invalid_request', 'The code_challenge is malformed');
  }
  const scopes = narrowScopes(params.get('scope'), client.scopes);
  if (scopes === undefined) {
    throw new RedirectableError(
      'invalid_scope',
      `The scope may only narrow the client's scopes (${client.scopes.join(' ')})`,
    );
  }

  const code = newSecret();
  const now = deps.clock();
  await deps.pool.query(
    `INSERT INTO auth.authorization_codes
       (id, code_hash, client_id, redirect_uri, scopes, code_challenge, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      randomUUID(),
      digestSecret(code),
      client.id,
      redirectUri ?? null,
      scopes,
      challenge ?? null,
      now,
      new Date(now.getTime() + AUTHORIZATION_CODE_TTL_MS),
    ],
  );
  return code;
}
