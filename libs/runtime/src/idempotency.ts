import { createHash } from 'node:crypto';
import { baseError, fieldError } from '@ofp/contracts';
import type { Pool, PoolClient } from './postgres.js';
import { isSealed, sealedContext, type SealedColumn, type SecretsKeyring } from './secrets-at-rest.js';

/** Printable ASCII, 1 to 255 characters (API.md §5). */
const KEY = /^[\x20-\x7e]{1,255}$/;
/** How long a key's first response is replayed. */
export const IDEMPOTENCY_WINDOW_HOURS = 24;

/** A response as replayed: its status, the headers that matter to a replay, and its exact bytes. */
export interface StoredResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** The body as sent (JSON text): a replay answers the same bytes (API.md §5). */
  readonly body: string;
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

/** A request that holds a key until its response is recorded with {@link IdempotencyStore.finish}. */
const IN_PROGRESS = 0;
/** How long a key stays held by a request that never finished (its process died), before another may take it. */
const HOLD_SECONDS = 60;

/**
 * Idempotency records (API.md §5), one table per service that writes: `(org_id, key)`, the request's
 * hash, and the response to replay for 24 h. Two ways to use it:
 *
 * - in the write's transaction (`find` first, then `record` with the transaction's client), so a replay
 *   can never see a response whose change did not commit: the api's record writes;
 * - around a request (`begin`, then `finish` or `abandon`), for writes made of several statements of
 *   their own: the key is held while the request runs, and a second request with it meanwhile is a 409.
 *   A process that dies between its write's commit and `finish` leaves the key held for a minute; a
 *   request with it after that runs again.
 */
export class IdempotencyStore {
  /**
   * `table`: the schema-qualified table (`api.idempotency_keys`), laid out by {@link layOut}. With
   * `secrets`, the stored bodies are sealed (API.md §12: no response kept for replays holds a secret in
   * clear), for a service whose responses carry secrets.
   */
  constructor(
    private readonly pool: Pool,
    private readonly table: string,
    private readonly secrets?: SecretsKeyring,
  ) {
    if (!/^[a-z_]+\.[a-z_]+$/.test(table)) throw new Error(`not a table name: ${table}`);
  }

  /** The stored bodies as a column of sealed values, for the start-up check and re-wrap. */
  get sealedBodies(): SealedColumn {
    return { table: this.table, key: ['org_id', 'key'], column: 'body' };
  }

  /** A body as stored: sealed for its row with `secrets`; an empty body (a held key) as it is. */
  private stored(orgId: number, key: string, body: string): string {
    if (this.secrets === undefined || body === '') return body;
    return this.secrets.seal(body, sealedContext(this.table, [orgId, key]));
  }

  private opened(orgId: number, key: string, body: string): string {
    if (this.secrets === undefined || !isSealed(body)) return body;
    return this.secrets.open(body, sealedContext(this.table, [orgId, key]));
  }

  /**
   * Creates the table in its schema (which must exist) or brings an older one up to date: the body
   * was kept as jsonb before, which reorders keys, so replays were not the first response's bytes.
   * Idempotent; part of the owning service's migration.
   */
  async layOut(client: PoolClient): Promise<void> {
    const [schema, name] = this.table.split('.') as [string, string];
    await client.query(`
      CREATE TABLE IF NOT EXISTS ${this.table} (
        org_id bigint NOT NULL,
        key text NOT NULL,
        request_hash text NOT NULL,
        status integer NOT NULL,
        headers jsonb NOT NULL,
        body text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (org_id, key)
      );
      CREATE INDEX IF NOT EXISTS idempotency_keys_created ON ${this.table} (created_at);
      DO $$ BEGIN
        IF (SELECT data_type FROM information_schema.columns
             WHERE table_schema = '${schema}' AND table_name = '${name}' AND column_name = 'body') = 'jsonb' THEN
          ALTER TABLE ${this.table} ALTER COLUMN body TYPE text USING body::text;
        END IF;
      END $$;`);
  }

  /** The stored response for this key, if any; a 422 when the key was used with another request. */
  async find(orgId: number, key: string, hash: string): Promise<StoredResponse | undefined> {
    const { rows } = await this.pool.query<{
      request_hash: string;
      status: number;
      headers: Record<string, string>;
      body: string;
    }>(
      `SELECT request_hash, status, headers, body FROM ${this.table}
        WHERE org_id = $1 AND key = $2 AND created_at > now() - make_interval(hours => $3)`,
      [orgId, key, IDEMPOTENCY_WINDOW_HOURS],
    );
    const row = rows[0];
    if (!row) return undefined;
    if (row.request_hash !== hash) {
      throw baseError('Unprocessable', 'Idempotency-Key was already used with a different request');
    }
    if (row.status === IN_PROGRESS)
      throw baseError('Conflict', 'A request with this Idempotency-Key is still in progress');
    return { status: row.status, headers: row.headers, body: this.opened(orgId, key, row.body) };
  }

  /**
   * Holds the key for this request: undefined when the request is to run (then `finish` or `abandon`
   * it), the stored response when it ran already; a 422 for another request's key, a 409 while the
   * request that holds it runs.
   */
  async begin(orgId: number, key: string, hash: string): Promise<StoredResponse | undefined> {
    const held = await this.pool.query(
      `INSERT INTO ${this.table} AS k (org_id, key, request_hash, status, headers, body)
       VALUES ($1, $2, $3, ${IN_PROGRESS}, '{}', '')
       ON CONFLICT (org_id, key) DO UPDATE SET request_hash = EXCLUDED.request_hash, status = ${IN_PROGRESS},
         headers = '{}', body = '', created_at = now()
         WHERE k.created_at <= now() - make_interval(hours => $4)
            OR k.status = ${IN_PROGRESS} AND k.created_at <= now() - make_interval(secs => $5)`,
      [orgId, key, hash, IDEMPOTENCY_WINDOW_HOURS, HOLD_SECONDS],
    );
    if (held.rowCount === 1) return undefined;
    const stored = await this.find(orgId, key, hash);
    // Gone between the two statements (abandoned, or expired): the request may run.
    return stored ?? this.begin(orgId, key, hash);
  }

  /** Stores the response of a request that `begin` let run. */
  async finish(orgId: number, key: string, response: StoredResponse): Promise<void> {
    await this.pool.query(
      `UPDATE ${this.table} SET status = $3, headers = $4, body = $5
        WHERE org_id = $1 AND key = $2 AND status = ${IN_PROGRESS}`,
      [orgId, key, response.status, JSON.stringify(response.headers), this.stored(orgId, key, response.body)],
    );
  }

  /** Frees the key of a request that `begin` let run and that changed nothing (it failed). */
  async abandon(orgId: number, key: string): Promise<void> {
    await this.pool.query(
      `DELETE FROM ${this.table} WHERE org_id = $1 AND key = $2 AND status = ${IN_PROGRESS}`,
      [orgId, key],
    );
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
      `INSERT INTO ${this.table} AS k (org_id, key, request_hash, status, headers, body)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (org_id, key) DO UPDATE SET request_hash = EXCLUDED.request_hash, status = EXCLUDED.status,
         headers = EXCLUDED.headers, body = EXCLUDED.body, created_at = now()
         WHERE k.created_at <= now() - make_interval(hours => $7)`,
      [
        orgId,
        key,
        hash,
        response.status,
        JSON.stringify(response.headers),
        this.stored(orgId, key, response.body),
        IDEMPOTENCY_WINDOW_HOURS,
      ],
    );
    return result.rowCount === 1;
  }

  /** Deletes expired keys; resolves with how many. */
  async purgeExpired(): Promise<number> {
    const result = await this.pool.query(
      `DELETE FROM ${this.table} WHERE created_at <= now() - make_interval(hours => $1)`,
      [IDEMPOTENCY_WINDOW_HOURS],
    );
    return result.rowCount ?? 0;
  }
}
