import {
  DpopProofError,
  type AuthMetrics,
  type Clock,
  type DpopProof,
  type DpopProofVerifier,
  type Scope,
} from '@ofp/auth-tokens';
import { inTransaction, type Pool, type PoolClient } from '@ofp/runtime';
import { jsonReply, type Reply } from '@ofp/http-api';
import { digestSecret } from '../secrets.js';
import { lockClient } from '../tenants.js';
import type { Client, ClientRequest } from './client-auth.js';
import { OAuthError } from './errors.js';
import type { OAuthParams } from './form.js';
import type { Grants, TokenResponse } from './grants.js';
import { GRANT_TYPES, tokenEndpoint as tokenEndpointUrl, type GrantType } from './metadata.js';
import { verifierMatches } from './pkce.js';
import { decideRefresh } from './refresh-decision.js';
import { narrowScopes } from './scopes.js';

export interface TokenEndpointDeps {
  pool: Pool;
  grants: Grants;
  clock: Clock;
  issuer: string;
  /** Verifies DPoP proofs (RFC 9449 §4.3) and remembers them against replay. */
  dpop: DpopProofVerifier;
  metrics?: AuthMetrics;
}

/**
 * An outcome decided inside a transaction: either a token response, or an error to answer with after
 * the transaction commits (a reused code or refresh token revokes its grant and is still an error).
 */
type Outcome = TokenResponse | OAuthError;

const isGrantType = (name: string): name is GrantType => (GRANT_TYPES as readonly string[]).includes(name);

/**
 * `POST /oauth/token` (RFC 6749 §3.2) after form parsing, client authentication and rate limiting:
 * the `authorization_code` (§4.1.3, RFC 7636 §4.6), `refresh_token` (§6) and `client_credentials`
 * (§4.4) grants. Every client may use all three (API.md §7). With a DPoP proof (RFC 9449 §5) the
 * access token is bound to the proof's key, and so are the refresh tokens of a grant issued with one.
 */
export function tokenEndpoint(deps: TokenEndpointDeps): (request: ClientRequest) => Promise<Reply> {
  const url = tokenEndpointUrl(deps.issuer);
  return async ({ form, client, dpop }) => {
    const grantType = form.get('grant_type');
    // The request is one this endpoint serves before its proof is looked at (RFC 6749 §5.2's
    // `invalid_request` and `unsupported_grant_type` first, as oidc-provider answers): a proof is
    // checked, and its `jti` spent, only for a grant that could be issued.
    if (grantType === undefined)
      throw new OAuthError('invalid_request', 'The grant_type parameter is required');
    if (!isGrantType(grantType)) {
      throw new OAuthError('unsupported_grant_type', `Supported: ${GRANT_TYPES.join(', ')}`);
    }
    const proof = await dpopProof(deps.dpop, url, client, dpop);
    let outcome: Outcome;
    switch (grantType) {
      case 'authorization_code':
        outcome = await whileActive(deps, client, (tx) => exchangeCode(deps, tx, client, form, proof));
        break;
      case 'refresh_token':
        outcome = await whileActive(deps, client, (tx) => refresh(deps, tx, client, form, proof));
        break;
      case 'client_credentials':
        // No refresh token (RFC 6749 §4.4.3) and nothing stored (API.md §7): the client authenticated
        // as enabled a moment ago, and a disable that commits meanwhile denies its tokens everywhere.
        outcome = await deps.grants.issueToClient(client, narrowed(form, client.scopes), proof?.jkt);
        break;
    }
    if (outcome instanceof OAuthError) throw outcome;
    deps.metrics?.issued(grantType);
    // RFC 9449 §8.2: the nonce for the client's next proof, when nonces are required.
    const nonce = proof === undefined ? undefined : deps.dpop.nonce();
    // RFC 6749 §5.1: responses with tokens must not be cached.
    return jsonReply(200, outcome, {
      'Cache-Control': 'no-store',
      Pragma: 'no-cache',
      ...(nonce === undefined ? {} : { 'DPoP-Nonce': nonce }),
    });
  };
}

/**
 * The DPoP proof of a token request (RFC 9449 §5), for a POST to the token endpoint's URL: verified
 * whenever one is sent (any client may bind its tokens, §5), and required of a client registered with
 * `dpop_bound_access_tokens` (§5.2). Any fault is `invalid_dpop_proof`.
 */
async function dpopProof(
  verifier: DpopProofVerifier,
  url: string,
  client: Client,
  header: string | string[] | undefined,
): Promise<DpopProof | undefined> {
  // RFC 9449 §8: with nonces required, the nonce the next proof is to carry.
  const nonce = verifier.nonce();
  const nonceHeader = nonce === undefined ? {} : { 'DPoP-Nonce': nonce };
  if (header === undefined) {
    if (!client.dpopBoundAccessTokens) return undefined;
    throw new OAuthError(
      'invalid_dpop_proof',
      'This client must send a DPoP proof (RFC 9449) with its token requests',
      400,
      nonceHeader,
    );
  }
  try {
    return await verifier.verify(header, { method: 'POST', url });
  } catch (error) {
    if (error instanceof DpopProofError)
      throw new OAuthError(error.code, error.description, 400, nonceHeader);
    throw error;
  }
}

/**
 * Runs a grant in a transaction that holds the client's row shared: a client disabled since it
 * authenticated gets nothing, and one being disabled waits, so that every grant it made is revoked.
 */
function whileActive(
  deps: TokenEndpointDeps,
  client: Client,
  grant: (tx: PoolClient) => Promise<Outcome>,
): Promise<Outcome> {
  return inTransaction(deps.pool, async (tx) => {
    const current = await lockClient(tx, client.id, 'share');
    if (current === undefined || current.disabled_at !== null) {
      return new OAuthError('invalid_client', 'The client is disabled');
    }
    return grant(tx);
  });
}

function required(form: OAuthParams, name: string): string {
  const value = form.get(name);
  if (value === undefined) throw new OAuthError('invalid_request', `The ${name} parameter is required`);
  return value;
}

function narrowed(form: OAuthParams, allowed: readonly Scope[]): Scope[] {
  const scopes = narrowScopes(form.get('scope'), allowed);
  if (scopes === undefined) {
    throw new OAuthError(
      'invalid_scope',
      `The scope may only narrow the granted scopes (${allowed.join(' ')})`,
    );
  }
  return scopes;
}

interface CodeRow {
  id: string;
  client_id: string;
  redirect_uri: string | null;
  scopes: Scope[];
  code_challenge: string | null;
  expires_at: Date;
  used_at: Date | null;
}

async function exchangeCode(
  deps: TokenEndpointDeps,
  tx: PoolClient,
  client: Client,
  form: OAuthParams,
  proof: DpopProof | undefined,
): Promise<Outcome> {
  const code = required(form, 'code');
  const { rows } = await tx.query<CodeRow>(
    `SELECT id, client_id, redirect_uri, scopes, code_challenge, expires_at, used_at
       FROM auth.authorization_codes WHERE code_hash = $1 FOR UPDATE`,
    [digestSecret(code)],
  );
  const row = rows[0];
  // RFC 6749 §4.1.3: the code must have been issued to the authenticated client.
  if (row === undefined || row.client_id !== client.id) {
    return new OAuthError('invalid_grant', 'The authorization code is invalid');
  }
  if (row.used_at !== null) {
    // RFC 6749 §4.1.2: a code used twice revokes the tokens issued from it (API.md §7).
    const grantId = await deps.grants.grantIdOfCode(tx, row.id);
    if (grantId !== undefined) await deps.grants.revoke(tx, grantId);
    return new OAuthError('invalid_grant', 'The authorization code was already used');
  }
  if (row.expires_at <= deps.clock())
    return new OAuthError('invalid_grant', 'The authorization code expired');
  const scopes = narrowed(form, row.scopes);
  // From here on the code is spent, whether it is redeemed or refused: a wrong PKCE verifier or
  // redirect_uri may be someone who intercepted the code trying (API.md §12), and the committed
  // outcome leaves nothing to try again.
  await tx.query('UPDATE auth.authorization_codes SET used_at = $2 WHERE id = $1', [row.id, deps.clock()]);
  // RFC 6749 §4.1.3: redirect_uri must repeat the authorization request's, when that one had it.
  const redirectUri = form.get('redirect_uri');
  if (
    (row.redirect_uri !== null && redirectUri !== row.redirect_uri) ||
    (redirectUri ?? client.redirectUri) !== client.redirectUri
  ) {
    return new OAuthError('invalid_grant', 'The redirect_uri does not match the authorization request');
  }
  const verifier = form.get('code_verifier');
  if (row.code_challenge !== null) {
    if (verifier === undefined || !verifierMatches(verifier, row.code_challenge)) {
      return new OAuthError('invalid_grant', 'The code_verifier does not match the code_challenge');
    }
  } else if (verifier !== undefined) {
    // RFC 9700 §2.1.1: a verifier for a code issued without a challenge signals a PKCE downgrade.
    return new OAuthError('invalid_grant', 'The authorization request had no code_challenge');
  }
  const grant = await deps.grants.create(tx, {
    clientId: client.id,
    organizationId: client.organizationId,
    scopes: row.scopes,
    authorizationCodeId: row.id,
    // RFC 9449 §5: the grant's refresh tokens are bound to the proof's key, for confidential clients
    // too (docs/auth.md): a stolen refresh token is of no use without the key.
    dpopJkt: proof?.jkt ?? null,
  });
  return (await deps.grants.issuePair(tx, grant, scopes, proof?.jkt)).response;
}

async function refresh(
  deps: TokenEndpointDeps,
  tx: PoolClient,
  client: Client,
  form: OAuthParams,
  proof: DpopProof | undefined,
): Promise<Outcome> {
  const value = required(form, 'refresh_token');
  const invalid = new OAuthError('invalid_grant', 'The refresh token is invalid');
  const grantId = await deps.grants.grantIdOfRefreshToken(tx, value);
  if (grantId === undefined) return invalid;
  // Serializes concurrent refreshes of one grant; the token's state is read after the lock.
  const grant = await deps.grants.lock(tx, grantId);
  const presented = await deps.grants.refreshToken(tx, { value });
  // RFC 6749 §6: the refresh token must have been issued to the authenticated client.
  if (grant === undefined || presented === undefined || grant.clientId !== client.id) return invalid;
  if (grant.revokedAt !== null) return new OAuthError('invalid_grant', 'The grant was revoked');
  // RFC 9449 §5: a bound refresh token is used with a proof of its key. Refused before any decision,
  // so that whoever holds the token without the key changes nothing.
  if (grant.dpopJkt !== null && proof?.jkt !== grant.dpopJkt) {
    return new OAuthError(
      'invalid_dpop_proof',
      proof === undefined
        ? 'The refresh token is bound to a DPoP key: send a proof signed by it'
        : 'The DPoP proof is signed by another key than the refresh token is bound to',
    );
  }

  const successor =
    presented.replacedBy === null
      ? undefined
      : await deps.grants.refreshToken(tx, { id: presented.replacedBy });
  const decision = decideRefresh(presented, successor?.state, deps.clock());
  switch (decision) {
    case 'expired':
      return new OAuthError('invalid_grant', 'The refresh token expired');
    case 'reuse':
      await deps.grants.revoke(tx, grant.id);
      return new OAuthError('invalid_grant', 'The refresh token was already used; the grant is revoked');
    case 'rotate': {
      // RFC 6749 §6: the scope may narrow what was originally granted, never widen it.
      const issued = await deps.grants.issuePair(tx, grant, narrowed(form, grant.scopes), proof?.jkt);
      await deps.grants.markRotated(tx, presented, issued.refreshTokenId);
      return issued.response;
    }
    case 'retry': {
      if (successor === undefined) throw new Error('a retry needs the pair it supersedes');
      const issued = await deps.grants.issuePair(tx, grant, narrowed(form, grant.scopes), proof?.jkt);
      await deps.grants.markRetried(tx, presented, successor, issued.refreshTokenId);
      return issued.response;
    }
    default: {
      const unhandled: never = decision;
      throw new Error(`unhandled refresh decision ${String(unhandled)}`);
    }
  }
}
