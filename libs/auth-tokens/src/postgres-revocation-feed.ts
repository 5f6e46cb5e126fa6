import type { Logger, Pool } from '@ofp/runtime';
import type { Revocation, RevocationFeed } from './revocations.js';

export interface PostgresRevocationFeedOptions {
  /** A pool on the database that holds the auth service's schema. */
  pool: Pool;
  logger: Logger;
  /** Default 1 s: with it, a revocation reaches every verifier well within API.md §7's 5 s. */
  intervalMs?: number;
  /**
   * How far behind the previous poll each poll looks again (default 60 s). Rows are picked by the time
   * their transaction started, and a transaction may commit after a poll that ran later than its start,
   * so a poll re-reads that margin rather than following an id or time cursor exactly.
   */
  lookbackMs?: number;
}

interface Row {
  polled_at: Date;
  grant_id: string | null;
  token_id: string | null;
  expires_at: Date | null;
}

/**
 * Revocations read from the auth service's `auth.revocations` table (its migration defines the table;
 * the service writes a row in the same transaction as the revocation). For standalone mode and any
 * deployment where the verifier reaches that database; the distributed deployment reads them from the
 * bus instead. Polls once per interval; a failed poll is logged and retried, and the next successful
 * poll looks back to the last successful one, so an outage loses nothing.
 */
export function createPostgresRevocationFeed(options: PostgresRevocationFeedOptions): RevocationFeed {
  const intervalMs = options.intervalMs ?? 1_000;
  const lookbackSeconds = (options.lookbackMs ?? 60_000) / 1000;
  let since: Date | null = null;
  let timer: NodeJS.Timeout | undefined;
  let polling: Promise<void> | undefined;
  let stopped = false;

  async function poll(deliver: (revocation: Revocation) => void): Promise<void> {
    const { rows } = await options.pool.query<Row>(
      `SELECT now() AS polled_at, r.grant_id::text, r.token_id::text, r.expires_at
         FROM (SELECT 1) AS tick
         LEFT JOIN auth.revocations r
           ON r.expires_at > now()
          AND ($1::timestamptz IS NULL OR r.recorded_at > $1::timestamptz - make_interval(secs => $2))`,
      [since, lookbackSeconds],
    );
    for (const row of rows) {
      if (row.grant_id === null || row.expires_at === null) continue;
      deliver(
        row.token_id === null
          ? { grantId: row.grant_id, expiresAt: row.expires_at }
          : { grantId: row.grant_id, tokenId: row.token_id, expiresAt: row.expires_at },
      );
    }
    since = rows[0]?.polled_at ?? since;
  }

  function schedule(deliver: (revocation: Revocation) => void): void {
    if (stopped) return;
    timer = setTimeout(() => {
      polling = poll(deliver)
        .catch((error: unknown) => options.logger.warn({ err: error }, 'polling revocations failed'))
        .finally(() => {
          polling = undefined;
          schedule(deliver);
        });
    }, intervalMs);
  }

  return {
    async start(deliver) {
      stopped = false;
      await poll(deliver);
      schedule(deliver);
    },
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await polling;
    },
  };
}
