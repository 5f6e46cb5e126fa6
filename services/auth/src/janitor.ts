import type { AuthMetrics, Clock } from '@ofp/auth-tokens';
import { inTransaction, type Logger, type Module, type Pool } from '@ofp/runtime';

/** Rows deleted per statement: short transactions, and locks held for moments. */
const BATCH = 1_000;
/**
 * A revoked token of no grant is remembered this long after it expired: the verifiers' clock tolerance
 * and then some, as their deny-lists keep it.
 */
const REVOKED_TOKEN_RETENTION_MS = 5 * 60_000;
/** Ties the runs of every replica together: one purges at a time. */
const LOCK_KEY = 'ofp.auth.janitor';

/** The tables the janitor purges, as its metric labels them. */
export const PURGED_TABLES = [
  'refresh_tokens',
  'grants',
  'authorization_codes',
  'revoked_access_tokens',
  'client_assertions',
] as const;
export type PurgedTable = (typeof PURGED_TABLES)[number];

export interface JanitorOptions {
  pool: Pool;
  clock: Clock;
  logger: Logger;
  metrics?: AuthMetrics;
  /** Between two runs (default 10 minutes); the first run is at start. */
  intervalMs?: number;
}

/**
 * Purges what can no longer be used (API.md §7: storage does not grow with the number of tokens issued),
 * in batches of {@link BATCH} rows:
 *
 * - refresh tokens past their expiry whose access token has expired too, and every refresh token of a
 *   revoked grant once its access token has expired (a revoked grant refuses them all; its access tokens
 *   are denied by announcement until then);
 * - grants left without refresh tokens, in the transaction that deleted their last one;
 * - expired authorization codes no grant was issued from (a code a grant came from stays while the grant
 *   does, so that presenting it again still revokes the grant, RFC 6749 §4.1.2);
 * - revoked client-credentials tokens, five minutes after they expired;
 * - the `jti`s of private_key_jwt assertions once the assertions expired (a replay is refused by `exp`
 *   then, with the verifier's 30 s tolerance: hence the same retention as revoked tokens').
 *
 * What a missing row means is always the safe answer: an unknown refresh token or code is `invalid_grant`,
 * and an access token whose grant or pair is gone is not active.
 */
export class Janitor implements Module {
  readonly name = 'auth-janitor';
  private readonly intervalMs: number;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  /** Set while the module stops: a run under way ends after its current batch. */
  private stopping = false;

  constructor(private readonly options: JanitorOptions) {
    this.intervalMs = options.intervalMs ?? 10 * 60_000;
  }

  /** A run at start, then one per interval. */
  start(): Promise<void> {
    this.stopping = false;
    this.schedule(0);
    return Promise.resolve();
  }

  /** Ends a run under way after its current batch. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearTimeout(this.timer);
    await this.running;
  }

  ready(): boolean {
    return true;
  }

  /**
   * One run: purges every table until nothing is left to purge, unless another replica is purging.
   * Resolves with the rows deleted per table.
   */
  async purge(): Promise<Record<PurgedTable, number>> {
    const purged: Record<PurgedTable, number> = {
      refresh_tokens: 0,
      grants: 0,
      authorization_codes: 0,
      revoked_access_tokens: 0,
      client_assertions: 0,
    };
    const client = await this.options.pool.connect();
    try {
      const { rows } = await client.query<{ locked: boolean }>(
        'SELECT pg_try_advisory_lock(hashtext($1)) AS locked',
        [LOCK_KEY],
      );
      if (rows[0]?.locked !== true) return purged;
      try {
        const now = this.options.clock();
        const count = (table: PurgedTable, rows: number) => {
          purged[table] += rows;
          if (rows > 0) this.options.metrics?.purged(table, rows);
        };
        for (;;) {
          const batch = await this.purgeRefreshTokens(now);
          count('refresh_tokens', batch.refreshTokens);
          count('grants', batch.grants);
          if (batch.refreshTokens < BATCH || this.stopping) break;
        }
        await this.repeat(
          () => this.purgeCodes(now),
          (rows) => count('authorization_codes', rows),
        );
        const forgetBefore = new Date(now.getTime() - REVOKED_TOKEN_RETENTION_MS);
        await this.repeat(
          () => this.purgeRevokedTokens(forgetBefore),
          (rows) => count('revoked_access_tokens', rows),
        );
        await this.repeat(
          () => this.purgeClientAssertions(forgetBefore),
          (rows) => count('client_assertions', rows),
        );
      } finally {
        await client.query('SELECT pg_advisory_unlock(hashtext($1))', [LOCK_KEY]);
      }
    } finally {
      client.release();
    }
    const total = Object.values(purged).reduce((a, b) => a + b, 0);
    if (total > 0) this.options.logger.info({ purged }, `purged ${total} expired rows`);
    return purged;
  }

  private schedule(delayMs: number): void {
    if (this.stopping) return;
    this.timer = setTimeout(() => {
      this.running = this.purge().then(
        () => this.schedule(this.intervalMs),
        (error: unknown) => {
          this.options.logger.warn({ err: error }, 'purging expired tokens failed; trying again later');
          this.schedule(this.intervalMs);
        },
      );
    }, delayMs);
    this.timer.unref();
  }

  /** Runs `batch` until it deletes fewer than a batch (or the janitor stops). */
  private async repeat(batch: () => Promise<number>, counted: (rows: number) => void): Promise<void> {
    for (;;) {
      const rows = await batch();
      counted(rows);
      if (rows < BATCH || this.stopping) return;
    }
  }

  private purgeRefreshTokens(now: Date): Promise<{ refreshTokens: number; grants: number }> {
    return inTransaction(this.options.pool, async (tx) => {
      const { rows } = await tx.query<{ grant_id: string }>(
        `DELETE FROM auth.refresh_tokens WHERE id IN (
           (SELECT id FROM auth.refresh_tokens
             WHERE expires_at <= $1 AND access_token_expires_at <= $1 LIMIT $2)
           UNION
           (SELECT rt.id FROM auth.grants g JOIN auth.refresh_tokens rt ON rt.grant_id = g.id
             WHERE g.revoked_at IS NOT NULL AND rt.access_token_expires_at <= $1 LIMIT $2))
         RETURNING grant_id`,
        [now, BATCH],
      );
      if (rows.length === 0) return { refreshTokens: 0, grants: 0 };
      const grants = await tx.query(
        `DELETE FROM auth.grants g WHERE g.id = ANY($1::uuid[])
            AND NOT EXISTS (SELECT 1 FROM auth.refresh_tokens rt WHERE rt.grant_id = g.id)`,
        [[...new Set(rows.map((row) => row.grant_id))]],
      );
      return { refreshTokens: rows.length, grants: grants.rowCount ?? 0 };
    });
  }

  private async purgeCodes(now: Date): Promise<number> {
    const { rowCount } = await this.options.pool.query(
      `DELETE FROM auth.authorization_codes WHERE id IN (
         SELECT c.id FROM auth.authorization_codes c
          WHERE c.expires_at <= $1
            AND NOT EXISTS (SELECT 1 FROM auth.grants g WHERE g.authorization_code_id = c.id)
          LIMIT $2)`,
      [now, BATCH],
    );
    return rowCount ?? 0;
  }

  private async purgeRevokedTokens(before: Date): Promise<number> {
    const { rowCount } = await this.options.pool.query(
      `DELETE FROM auth.revoked_access_tokens WHERE token_id IN (
         SELECT token_id FROM auth.revoked_access_tokens WHERE expires_at <= $1 LIMIT $2)`,
      [before, BATCH],
    );
    return rowCount ?? 0;
  }

  private async purgeClientAssertions(before: Date): Promise<number> {
    const { rowCount } = await this.options.pool.query(
      `DELETE FROM auth.client_assertions WHERE (client_id, jti) IN (
         SELECT client_id, jti FROM auth.client_assertions WHERE expires_at <= $1 LIMIT $2)`,
      [before, BATCH],
    );
    return rowCount ?? 0;
  }
}
