import { createHash } from 'node:crypto';
import { baseError, fieldError } from '@ofp/contracts';
import type { Pool, PoolClient } from '@ofp/runtime';

/** Printable ASCII, 1 to 255 characters (API.md §5). */
const KEY = /^[\x20-\x7e]{1,255}$/;
/** How long a key's first response is replayed. */
export const IDEMPOTENCY_WINDOW_HOURS = 24;

export interface StoredResponse {
  status: number;
  headers: Record<string, string>;
  body: unknown;
}

/** Validates an `Idempotency-Key` header; undefined when the request has none. */
export function parseIdempotencyKey(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (!KEY.test(header))
    throw fieldError('Invalid', 'Idempotency-Key', 'must be 1 to 255 printable ASCII characters');
  return header;
}

/** What makes two requests "the same": method, path and body. */
export function requestHash(method: string, path: string, body: unknown): string {
  return createHash('sha256')
    .update(`${method} ${path}\n${JSON.stringify(body ?? null)}`)
    .digest('hex');
}

/**
 * Idempotency records live in `api.idempotency_keys`. A write records its response in the same
 * transaction as its events, so a replay can never see a response whose change did not commit.
 */
export class IdempotencyStore {
  constructor(private readonly pool: Pool) {}

  /** The stored response for this key, if any; a 422 when the key was used with another request. */
  async find(orgId: number, key: string, hash: string): Promise<StoredResponse | undefined> {
    const { rows } = await this.pool.query<{
      request_hash: string;
      status: number;
      headers: Record<string, string>;
      body: unknown;
    }>(
      `SELECT request_hash, status, headers, body FROM api.idempotency_keys
        WHERE org_id = $1 AND key = $2 AND created_at > now() - make_interval(hours => $3)`,
      [orgId, key, IDEMPOTENCY_WINDOW_HOURS],
    );
    const row = rows[0];
    if (!row) return undefined;
    if (row.request_hash !== hash) {
      throw baseError('Unprocessable', 'Idempotency-Key was already used with a different request');
    }
    return { status: row.status, headers: row.headers, body: row.body };
  }

  /**
   * Records the response inside the write's transaction. Returns false when a concurrent request
   * with the same key committed first (the caller then rolls back and replays that one).
   */
  async record(
    client: PoolClient,
    orgId: number,
    key: string,
    hash: string,
    response: StoredResponse,
  ): Promise<boolean> {
    const result = await client.query(
      `INSERT INTO api.idempotency_keys (org_id, key, request_hash, status, headers, body)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (org_id, key) DO UPDATE SET request_hash = EXCLUDED.request_hash, status = EXCLUDED.status,
         headers = EXCLUDED.headers, body = EXCLUDED.body, created_at = now()
         WHERE api.idempotency_keys.created_at <= now() - make_interval(hours => $7)`,
      [
        orgId,
        key,
        hash,
        response.status,
        JSON.stringify(response.headers),
        JSON.stringify(response.body),
        IDEMPOTENCY_WINDOW_HOURS,
      ],
    );
    return result.rowCount === 1;
  }

  /** Deletes expired keys; resolves with how many. */
  async purgeExpired(): Promise<number> {
    const result = await this.pool.query(
      'DELETE FROM api.idempotency_keys WHERE created_at <= now() - make_interval(hours => $1)',
      [IDEMPOTENCY_WINDOW_HOURS],
    );
    return result.rowCount ?? 0;
  }
}
