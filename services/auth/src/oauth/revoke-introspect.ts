import { epochSeconds, type Clock, type TokenVerifier } from '@ofp/auth-tokens';
import { inTransaction, type Pool, type PoolClient } from '@ofp/runtime';
import { jsonReply, type Reply } from '@ofp/http-api';
import { digestSecret } from '../secrets.js';
import type { ClientRequest } from './client-auth.js';
import { OAuthError } from './errors.js';
import type { OAuthParams } from './form.js';
import type { Grants } from './grants.js';

export interface TokenStatusDeps {
  pool: Pool;
  grants: Grants;
  clock: Clock;
  issuer: string;
  /** Verifies this service's own access tokens (signature, issuer, expiry); revocation is checked here. */
  verifier: TokenVerifier;
}

/** A token a client presented, resolved to what it is. */
type Resolved =
  | {
      kind: 'refresh';
      grantId: string;
      clientId: string;
      active: boolean;
      scopes: string[];
      expiresAt: Date;
      issuedAt: Date;
      organizationId: number;
    }
  | {
      kind: 'access';
      /** None for a client-credentials token. */
      grantId: string | undefined;
      tokenId: string;
      clientId: string;
      organizationId: number;
      scopes: readonly string[];
      issuedAt: Date;
      expiresAt: Date;
      /** The DPoP key it is bound to (`cnf.jkt`), if any. */
      jkt: string | undefined;
    }
  | { kind: 'unknown' };

/**
 * Finds the token as a refresh token, else as an access token. RFC 7009 §2.1 / RFC 7662 §2.1:
 * `token_type_hint` only speeds up the lookup, so both kinds are tried whatever it says.
 */
async function resolve(deps: TokenStatusDeps, tx: PoolClient, token: string): Promise<Resolved> {
  const { rows } = await tx.query<{
    grant_id: string;
    client_id: string;
    organization_id: number;
    live: boolean;
    scopes: string[];
    expires_at: Date;
    issued_at: Date;
  }>(
    `SELECT rt.grant_id, g.client_id, g.organization_id, rt.scopes, rt.expires_at, rt.issued_at,
            rt.state = 'active' AND g.revoked_at IS NULL AS live
       FROM auth.refresh_tokens rt JOIN auth.grants g ON g.id = rt.grant_id
      WHERE rt.token_hash = $1`,
    [digestSecret(token)],
  );
  const refresh = rows[0];
  if (refresh !== undefined) {
    return {
      kind: 'refresh',
      grantId: refresh.grant_id,
      clientId: refresh.client_id,
      organizationId: refresh.organization_id,
      active: refresh.live && refresh.expires_at > deps.clock(),
      scopes: refresh.scopes,
      expiresAt: refresh.expires_at,
      issuedAt: refresh.issued_at,
    };
  }
  try {
    const access = await deps.verifier.verify(token);
    return {
      kind: 'access',
      grantId: access.grantId,
      tokenId: access.tokenId,
      clientId: access.clientId,
      organizationId: access.orgId,
      scopes: access.scopes,
      issuedAt: access.issuedAt,
      expiresAt: access.expiresAt,
      jkt: access.jkt,
    };
  } catch {
    return { kind: 'unknown' };
  }
}

function tokenParameter(form: OAuthParams): string {
  const token = form.get('token');
  if (token === undefined) throw new OAuthError('invalid_request', 'The token parameter is required');
  return token;
}

/**
 * `POST /oauth/revoke` (RFC 7009): revoking a refresh or an access token revokes its whole grant
 * (API.md §7; §2.1 allows both directions); a client-credentials access token, of no grant, is revoked
 * alone. An unknown or expired token is answered with 200 as well (§2.2), a token of another client is
 * refused (§2.1).
 */
export function revokeEndpoint(deps: TokenStatusDeps): (request: ClientRequest) => Promise<Reply> {
  return async ({ form, client }) => {
    const token = tokenParameter(form);
    await inTransaction(deps.pool, async (tx) => {
      const resolved = await resolve(deps, tx, token);
      if (resolved.kind === 'unknown') return;
      if (resolved.clientId !== client.id) {
        throw new OAuthError('invalid_grant', 'The token was issued to another client');
      }
      if (resolved.grantId === undefined) {
        if (resolved.kind === 'access') await deps.grants.revokeToken(tx, resolved);
        return;
      }
      await deps.grants.lock(tx, resolved.grantId);
      await deps.grants.revoke(tx, resolved.grantId);
    });
    return { status: 200, headers: { 'Cache-Control': 'no-store', Pragma: 'no-cache' } };
  };
}

/**
 * `POST /oauth/introspect` (RFC 7662). A client may introspect only its own tokens; anything else is
 * reported inactive, so that the endpoint tells nothing about other clients' tokens (§4). An active
 * access token is described by the claims it carries (RFC 9068 §2.2, RFC 7662 §2.2).
 */
export function introspectEndpoint(deps: TokenStatusDeps): (request: ClientRequest) => Promise<Reply> {
  return async ({ form, client }) => {
    const token = tokenParameter(form);
    const body = await inTransaction(deps.pool, async (tx) => {
      const resolved = await resolve(deps, tx, token);
      if (resolved.kind === 'unknown' || resolved.clientId !== client.id) return { active: false };
      const common = {
        scope: resolved.scopes.join(' '),
        client_id: resolved.clientId,
        sub: resolved.clientId,
        org: resolved.organizationId,
        iss: deps.issuer,
        exp: epochSeconds(resolved.expiresAt),
      };
      if (resolved.kind === 'refresh') {
        return resolved.active
          ? { active: true, ...common, iat: epochSeconds(resolved.issuedAt) }
          : { active: false };
      }
      const live = await deps.grants.accessTokenLive(tx, resolved);
      return live
        ? {
            active: true,
            ...common,
            aud: deps.issuer,
            iat: epochSeconds(resolved.issuedAt),
            jti: resolved.tokenId,
            // RFC 9449 §6.2: a bound token's key, for a resource server that introspects.
            ...(resolved.jkt === undefined
              ? { token_type: 'bearer' }
              : { token_type: 'DPoP', cnf: { jkt: resolved.jkt } }),
          }
        : { active: false };
    });
    return jsonReply(200, body, { 'Cache-Control': 'no-store', Pragma: 'no-cache' });
  };
}
