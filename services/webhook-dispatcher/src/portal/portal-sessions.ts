import { createHash, randomBytes } from 'node:crypto';
import { TokenRejectedError, type AuthContext, type LocalTokens, type Scope } from '@ofp/auth-tokens';
import type { Pool, PoolClient } from '@ofp/runtime';

/** What marks a portal token: no JWT starts so (a JWT's first part is base64url JSON, `eyJ`). */
const PREFIX = 'ofp_portal_';

/**
 * What the portal page calls (`portal/portal.js`), by operationId: the organization's webhooks,
 * deliveries and event types, and the changes a subscriber makes to its endpoints (retry, recover,
 * send a test, rotate a secret, enable or disable). A portal token has `write` on these alone, where a
 * change (PATCH) may set nothing but `enabled` ({@link PORTAL_CHANGES}); on the dispatcher's other
 * operations it has `read` only (creating, deleting or repointing an endpoint is a 403, and so is
 * minting another session, which needs `operations`). Only the dispatcher's routes know the token.
 */
export const PORTAL_OPERATIONS: ReadonlySet<string> = new Set([
  'webhooks.search',
  'webhooks.get',
  'webhooks.patch',
  'webhooks.rotateSecret',
  'webhooks.test',
  'webhooks.recover',
  'webhooks.eventTypes',
  'webhook_deliveries.search',
  'webhook_deliveries.get',
  'webhook_deliveries.retry',
]);

/** The fields a portal token may change of a webhook: it enables and disables, nothing else. */
export const PORTAL_CHANGES: ReadonlySet<string> = new Set(['enabled']);

/** How long a session lasts unless asked otherwise, and the bounds of what may be asked (seconds). */
export const PORTAL_SESSION_TTL = { default: 3600, min: 60, max: 86_400 } as const;

/** A session as minted: the token is shown this once. */
export interface PortalSession {
  readonly id: number;
  readonly token: string;
  readonly createdAt: Date;
  readonly expiresAt: Date;
}

/**
 * The subscriber portal's sessions (docs/api-notes.md "Subscriber portal"): short-lived bearer tokens
 * of one organization, minted by an integrator's token, that the portal page sends to the
 * `/v2/webhooks*` and `/v2/webhook_deliveries*` operations. Only a token's SHA-256 is stored (the token
 * holds 256 random bits, so a fast hash is enough, as for the auth service's secrets).
 */
export class PortalSessions implements LocalTokens {
  constructor(
    private readonly pool: Pool,
    private readonly clock: () => Date,
  ) {}

  owns(token: string): boolean {
    return token.startsWith(PREFIX);
  }

  /**
   * A new session of the minting token's organization and client, lasting `ttlSeconds` and never
   * longer than the minting token itself, nor once that token is revoked (its `jti` and grant are
   * kept, for the deny-list); inserted with `db` (a transaction's client) when given.
   */
  async mint(
    minter: AuthContext,
    ttlSeconds: number,
    db: Pool | PoolClient = this.pool,
  ): Promise<PortalSession> {
    const token = `${PREFIX}${randomBytes(32).toString('base64url')}`;
    const createdAt = this.clock();
    const expiresAt = new Date(Math.min(createdAt.getTime() + ttlSeconds * 1000, minter.expiresAt.getTime()));
    const { rows } = await db.query<{ id: string }>(
      `INSERT INTO webhooks.portal_sessions (token_hash, org_id, client_id, created_at, expires_at,
                                             minted_by_token, minted_by_grant)
       VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
      [
        hashOf(token),
        minter.orgId,
        minter.clientId,
        createdAt,
        expiresAt,
        minter.tokenId,
        minter.grantId ?? null,
      ],
    );
    return { id: Number(rows[0]!.id), token, createdAt, expiresAt };
  }

  /**
   * The sessions as an operation outside {@link PORTAL_OPERATIONS} takes them: known, with `read`
   * alone, so that a write there answers 403 naming the scope it lacks.
   */
  readonly readOnly: LocalTokens = {
    owns: (token) => this.owns(token),
    verify: async (token) => ({ ...(await this.verify(token)), scopes: ['read'] }),
  };

  async verify(token: string): Promise<AuthContext> {
    const { rows } = await this.pool.query<{
      id: string;
      org_id: string;
      client_id: string;
      created_at: Date;
      expires_at: Date;
      minted_by_token: string | null;
      minted_by_grant: string | null;
    }>(
      `SELECT id, org_id, client_id, created_at, expires_at, minted_by_token, minted_by_grant
         FROM webhooks.portal_sessions WHERE token_hash = $1`,
      [hashOf(token)],
    );
    const session = rows[0];
    if (!session) throw new TokenRejectedError('The portal session is unknown', 'invalid');
    if (session.expires_at.getTime() <= this.clock().getTime())
      throw new TokenRejectedError('The portal session has expired: open the portal again', 'expired');
    return {
      clientId: session.client_id,
      orgId: Number(session.org_id),
      scopes: ['read', 'write'] satisfies Scope[],
      // The deny-list refuses the session as it refuses the token that minted it (API.md §7).
      tokenId: session.minted_by_token ?? `portal-session-${session.id}`,
      ...(session.minted_by_grant === null ? {} : { grantId: session.minted_by_grant }),
      issuedAt: session.created_at,
      expiresAt: session.expires_at,
    };
  }

  /** Deletes the sessions expired at `at`; how many. */
  async purgeExpired(at: Date): Promise<number> {
    const { rowCount } = await this.pool.query(
      'DELETE FROM webhooks.portal_sessions WHERE expires_at <= $1',
      [at],
    );
    return rowCount ?? 0;
  }
}

function hashOf(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}
