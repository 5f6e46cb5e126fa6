import { randomUUID } from 'node:crypto';
import type { Clock, Revocation, Scope } from '@ofp/auth-tokens';
import type { PoolClient } from '@ofp/runtime';
import { signAccessToken } from '../access-tokens.js';
import { ACCESS_TOKEN_TTL_SECONDS } from '../token-lifetime.js';
import { digestSecret, newSecret } from '../secrets.js';
import type { SigningKeys } from '../signing-keys.js';
import type { RefreshTokenState } from './refresh-decision.js';
import { scopeString } from './scopes.js';

/** The columns of a refresh token's row as it is issued. */
const REFRESH_TOKEN_COLUMNS =
  'id, grant_id, token_hash, scopes, access_token_id, access_token_expires_at, issued_at, expires_at, state';

/** A successful token response (RFC 6749 §5.1, API.md §7). */
export interface TokenResponse {
  access_token: string;
  /** `DPoP` for a token bound to a DPoP key (RFC 9449 §5). */
  token_type: 'bearer' | 'DPoP';
  expires_in: number;
  /** None for client credentials (RFC 6749 §4.4.3). */
  refresh_token?: string;
  scope: string;
}

/** RFC 9449 §5: a token bound to a DPoP key is of type `DPoP`, and presented with that scheme. */
function tokenType(jkt: string | undefined): TokenResponse['token_type'] {
  return jkt === undefined ? 'bearer' : 'DPoP';
}

export interface Grant {
  id: string;
  clientId: string;
  organizationId: number;
  scopes: Scope[];
  revokedAt: Date | null;
  /** The DPoP key its refresh tokens are bound to (RFC 9449 §5), by thumbprint; null if none. */
  dpopJkt: string | null;
}

export interface RefreshTokenRow {
  id: string;
  grantId: string;
  state: RefreshTokenState;
  expiresAt: Date;
  rotatedAt: Date | null;
  retriedAt: Date | null;
  replacedBy: string | null;
  accessTokenId: string;
  accessTokenExpiresAt: Date;
}

export interface GrantsOptions {
  keys: SigningKeys;
  /** Announces a revocation to every verifier, inside the transaction that revokes (API.md §7). */
  announce: (tx: PoolClient, revocation: Revocation) => Promise<void>;
  issuer: string;
  clock: Clock;
  refreshTokenTtlSeconds: number;
}

/**
 * Grants and the token pairs issued under them, in `auth.grants` and `auth.refresh_tokens`. Every
 * method runs on the caller's transaction, so that a state change and the revocation it announces
 * (a `grant.revoked` event) commit together.
 */
export class Grants {
  constructor(private readonly options: GrantsOptions) {}

  async create(
    tx: PoolClient,
    grant: {
      clientId: string;
      organizationId: number;
      scopes: readonly Scope[];
      authorizationCodeId?: string;
      dpopJkt: string | null;
    },
  ): Promise<Grant> {
    const id = randomUUID();
    await tx.query(
      `INSERT INTO auth.grants (id, client_id, organization_id, scopes, authorization_code_id, created_at, dpop_jkt)
       VALUES ($1, $2, $3, $4, $5, $6, $7)`,
      [
        id,
        grant.clientId,
        grant.organizationId,
        grant.scopes,
        grant.authorizationCodeId ?? null,
        this.options.clock(),
        grant.dpopJkt,
      ],
    );
    return {
      id,
      clientId: grant.clientId,
      organizationId: grant.organizationId,
      scopes: [...grant.scopes],
      revokedAt: null,
      dpopJkt: grant.dpopJkt,
    };
  }

  /** Locks a grant against concurrent refreshes and revocations for the rest of the transaction. */
  async lock(tx: PoolClient, grantId: string): Promise<Grant | undefined> {
    const { rows } = await tx.query<{
      id: string;
      client_id: string;
      organization_id: number;
      scopes: Scope[];
      revoked_at: Date | null;
      dpop_jkt: string | null;
    }>(
      'SELECT id, client_id, organization_id, scopes, revoked_at, dpop_jkt FROM auth.grants WHERE id = $1 FOR UPDATE',
      [grantId],
    );
    const row = rows[0];
    return row === undefined
      ? undefined
      : {
          id: row.id,
          clientId: row.client_id,
          organizationId: row.organization_id,
          scopes: row.scopes,
          revokedAt: row.revoked_at,
          dpopJkt: row.dpop_jkt,
        };
  }

  /**
   * Issues an access token and a refresh token under `grant`, the refresh token as the grant's current
   * one; the access token bound to the DPoP key `jkt` names, if any.
   */
  async issuePair(
    tx: PoolClient,
    grant: Grant,
    scopes: readonly Scope[],
    jkt: string | undefined,
  ): Promise<{ response: TokenResponse; refreshTokenId: string }> {
    const pair = await this.newPair(grant, scopes, jkt);
    await tx.query(
      `INSERT INTO auth.refresh_tokens (${REFRESH_TOKEN_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'active')`,
      pair.row,
    );
    return { refreshTokenId: pair.refreshTokenId, response: pair.response };
  }

  /**
   * The client-credentials grant (RFC 6749 §4.4): an access token and nothing else, stored nowhere (API.md
   * §7). Such a token belongs to no grant row: revoking it denies its `jti`, and disabling its client
   * denies every token of the client ({@link revokeToken}, {@link revokeClient}). With `jkt`, the token
   * is bound to that DPoP key.
   */
  async issueToClient(
    client: { id: string; organizationId: number },
    scopes: readonly Scope[],
    jkt: string | undefined,
  ): Promise<TokenResponse> {
    const access = await signAccessToken(
      this.options.keys,
      this.options.issuer,
      { clientId: client.id, organizationId: client.organizationId, scopes, jkt },
      this.options.clock(),
    );
    return {
      access_token: access.token,
      token_type: tokenType(jkt),
      expires_in: ACCESS_TOKEN_TTL_SECONDS,
      scope: scopeString(scopes),
    };
  }

  /** A signed access token and a new refresh token under `grant`, with the refresh token's row. */
  private async newPair(
    grant: Pick<Grant, 'id' | 'clientId' | 'organizationId'>,
    scopes: readonly Scope[],
    jkt: string | undefined,
  ): Promise<{
    response: TokenResponse & { refresh_token: string };
    refreshTokenId: string;
    row: unknown[];
  }> {
    const now = this.options.clock();
    const access = await signAccessToken(
      this.options.keys,
      this.options.issuer,
      { clientId: grant.clientId, organizationId: grant.organizationId, scopes, grantId: grant.id, jkt },
      now,
    );
    const refreshToken = newSecret();
    const refreshTokenId = randomUUID();
    return {
      refreshTokenId,
      // In the order of REFRESH_TOKEN_COLUMNS, but for the state.
      row: [
        refreshTokenId,
        grant.id,
        digestSecret(refreshToken),
        scopes,
        access.tokenId,
        access.expiresAt,
        now,
        new Date(now.getTime() + this.options.refreshTokenTtlSeconds * 1000),
      ],
      response: {
        access_token: access.token,
        token_type: tokenType(jkt),
        expires_in: ACCESS_TOKEN_TTL_SECONDS,
        refresh_token: refreshToken,
        scope: scopeString(scopes),
      },
    };
  }

  /** The grant a refresh token belongs to, by the token's value (not locked). */
  async grantIdOfRefreshToken(tx: PoolClient, refreshToken: string): Promise<string | undefined> {
    const { rows } = await tx.query<{ grant_id: string }>(
      'SELECT grant_id FROM auth.refresh_tokens WHERE token_hash = $1',
      [digestSecret(refreshToken)],
    );
    return rows[0]?.grant_id;
  }

  async refreshToken(
    tx: PoolClient,
    by: { value: string } | { id: string },
  ): Promise<RefreshTokenRow | undefined> {
    const { rows } = await tx.query<{
      id: string;
      grant_id: string;
      state: RefreshTokenState;
      expires_at: Date;
      rotated_at: Date | null;
      retried_at: Date | null;
      replaced_by: string | null;
      access_token_id: string;
      access_token_expires_at: Date;
    }>(
      `SELECT id, grant_id, state, expires_at, rotated_at, retried_at, replaced_by, access_token_id,
              access_token_expires_at
         FROM auth.refresh_tokens WHERE ${'value' in by ? 'token_hash' : 'id'} = $1`,
      ['value' in by ? digestSecret(by.value) : by.id],
    );
    const row = rows[0];
    return row === undefined
      ? undefined
      : {
          id: row.id,
          grantId: row.grant_id,
          state: row.state,
          expiresAt: row.expires_at,
          rotatedAt: row.rotated_at,
          retriedAt: row.retried_at,
          replacedBy: row.replaced_by,
          accessTokenId: row.access_token_id,
          accessTokenExpiresAt: row.access_token_expires_at,
        };
  }

  /** Records that `rotated` was exchanged for the pair `replacement`. */
  async markRotated(tx: PoolClient, rotated: RefreshTokenRow, replacement: string): Promise<void> {
    await tx.query(
      `UPDATE auth.refresh_tokens SET state = 'rotated', rotated_at = $2, replaced_by = $3 WHERE id = $1`,
      [rotated.id, this.options.clock(), replacement],
    );
  }

  /**
   * Records the one retry of `retried` (API.md §7): its successor's pair stops working, the access token
   * of that pair included, and `replacement` becomes its successor.
   */
  async markRetried(
    tx: PoolClient,
    retried: RefreshTokenRow,
    superseded: RefreshTokenRow,
    replacement: string,
  ): Promise<void> {
    await tx.query(`UPDATE auth.refresh_tokens SET state = 'superseded' WHERE id = $1`, [superseded.id]);
    await tx.query('UPDATE auth.refresh_tokens SET retried_at = $2, replaced_by = $3 WHERE id = $1', [
      retried.id,
      this.options.clock(),
      replacement,
    ]);
    if (superseded.accessTokenExpiresAt > this.options.clock()) {
      await this.options.announce(tx, {
        grantId: superseded.grantId,
        tokenId: superseded.accessTokenId,
        expiresAt: superseded.accessTokenExpiresAt,
      });
    }
  }

  /**
   * Revokes a grant: its refresh tokens stop working here, and its access tokens everywhere once the
   * revocation reaches the verifiers (API.md §7: within 5 s). Revoking twice changes nothing.
   */
  async revoke(tx: PoolClient, grantId: string): Promise<void> {
    const now = this.options.clock();
    const revoked = await tx.query(
      'UPDATE auth.grants SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL',
      [grantId, now],
    );
    if (revoked.rowCount === 0) return;
    const { rows } = await tx.query<{ last: Date | null }>(
      'SELECT max(access_token_expires_at) AS last FROM auth.refresh_tokens WHERE grant_id = $1',
      [grantId],
    );
    const last = rows[0]?.last;
    if (last != null && last > now) {
      await this.options.announce(tx, { grantId, expiresAt: last });
    }
  }

  /** The grant issued from an authorization code, if any. */
  async grantIdOfCode(tx: PoolClient, authorizationCodeId: string): Promise<string | undefined> {
    const { rows } = await tx.query<{ id: string }>(
      'SELECT id FROM auth.grants WHERE authorization_code_id = $1',
      [authorizationCodeId],
    );
    return rows[0]?.id;
  }

  /**
   * Revokes one access token of no grant (client credentials) until it expires: remembered by its `jti`
   * here, and announced to every verifier. Revoking it twice changes nothing.
   */
  async revokeToken(
    tx: PoolClient,
    token: { clientId: string; tokenId: string; expiresAt: Date },
  ): Promise<void> {
    const { rowCount } = await tx.query(
      `INSERT INTO auth.revoked_access_tokens (token_id, client_id, expires_at) VALUES ($1, $2, $3)
       ON CONFLICT DO NOTHING`,
      [token.tokenId, token.clientId, token.expiresAt],
    );
    if (rowCount === 1) {
      await this.options.announce(tx, { tokenId: token.tokenId, expiresAt: token.expiresAt });
    }
  }

  /**
   * Announces that every access token of a client is revoked (it was disabled): its client-credentials
   * tokens are stored nowhere, so verifiers deny the client itself until the last token it can hold,
   * one issued at this instant, has expired.
   */
  async revokeClient(tx: PoolClient, clientId: string): Promise<void> {
    const expiresAt = new Date(this.options.clock().getTime() + ACCESS_TOKEN_TTL_SECONDS * 1000);
    await this.options.announce(tx, { clientId, expiresAt });
  }

  /**
   * Whether an access token still works here: its grant and pair are live, or for a token of no grant
   * (client credentials), its client is enabled and the token not revoked.
   */
  async accessTokenLive(
    tx: Pick<PoolClient, 'query'>,
    token: { clientId: string; grantId?: string | undefined; tokenId: string },
  ): Promise<boolean> {
    const { rows } =
      token.grantId === undefined
        ? await tx.query<{ live: boolean }>(
            `SELECT c.disabled_at IS NULL
                    AND NOT EXISTS (SELECT 1 FROM auth.revoked_access_tokens WHERE token_id = $2) AS live
               FROM auth.clients c WHERE c.id = $1`,
            [token.clientId, token.tokenId],
          )
        : await tx.query<{ live: boolean }>(
            `SELECT g.revoked_at IS NULL AND rt.state <> 'superseded' AS live
               FROM auth.grants g JOIN auth.refresh_tokens rt ON rt.grant_id = g.id
              WHERE g.id = $1 AND rt.access_token_id = $2`,
            [token.grantId, token.tokenId],
          );
    return rows[0]?.live === true;
  }
}
