import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { baseError, fieldError, isDomainError } from '@ofp/contracts';
import {
  isSealed,
  sealedContext,
  type Pool,
  type PoolClient,
  type SealedColumn,
  type SecretsKeyring,
} from '@ofp/runtime';
import type { Reply } from './reply.js';

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

/** What makes two requests "the same" (API.md §5: the same key with the same body): its hashes. */
export interface RequestHash {
  /** Of the method, the path and the body with its members in any order (RFC 8785's canonical JSON). */
  readonly value: string;
  /**
   * Of the body as the versions before canonical JSON stored it (`JSON.stringify`, its members in the
   * order sent), so that a key one of them kept within its 24 h is replayed across an upgrade, not
   * refused; asked only when the stored hash is not `value`.
   */
  earlier(): string;
}

/**
 * The hashes of a request: the same body sent again with its members in another order (another JSON
 * serializer on the client's retry) is the same body, as JSON says (RFC 8259 §4: an object's members
 * are unordered); before, the hash over `JSON.stringify` made it a 422.
 */
export function requestHash(method: string, path: string, body: unknown): RequestHash {
  const hash = (json: string): string =>
    createHash('sha256').update(`${method} ${path}\n${json}`).digest('hex');
  return {
    value: hash(canonicalJson(body ?? null)),
    earlier: () => hash(JSON.stringify(body ?? null)),
  };
}

/**
 * The body's canonical JSON, or for the few parsed bodies RFC 8785 has no form for (a number past
 * 1.8e308, parsed as Infinity; a lone surrogate) its `JSON.stringify`: the hash is taken before the
 * body is validated, and a body the platform then refuses keeps no key, so its hash only has to be
 * the same for the same request. Before, canonicalize threw there and the write answered 500.
 */
function canonicalJson(body: unknown): string {
  try {
    return canonicalize(body)!;
  } catch {
    return JSON.stringify(body);
  }
}

/** The status of a key held by a process of an earlier version while its request ran. */
const HELD_BY_EARLIER_VERSION = 0;

/**
 * Idempotency records (API.md §5), one table per service that writes: `(org_id, key)`, the request's
 * hash, and the response to replay for 24 h. The HTTP pipeline keeps them for every write that
 * declares `Idempotency-Key` ({@link idempotentReply}): a stored response is replayed; otherwise the
 * write records its response in its own transaction ({@link IdempotentWrite}), so that a replay never
 * sees a response whose change did not commit, a change never commits without its response, and of
 * requests racing with one key one commits and the others answer its response.
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

  /** A body as stored: sealed for its row with `secrets`; an empty body as it is. */
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
  async find(orgId: number, key: string, hash: RequestHash): Promise<StoredResponse | undefined> {
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
    if (row.request_hash !== hash.value && row.request_hash !== hash.earlier()) {
      throw baseError('Unprocessable', 'Idempotency-Key was already used with a different request');
    }
    // Held by a process of the version before the pipeline kept keys, which recorded the response
    // after its write (status 0 until then): during a rolling upgrade, its request may still run.
    if (row.status === HELD_BY_EARLIER_VERSION)
      throw baseError('Conflict', 'A request with this Idempotency-Key is still in progress');
    return { status: row.status, headers: row.headers, body: this.opened(orgId, key, row.body) };
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

/**
 * A write with an `Idempotency-Key`, as its operation sees it: {@link record} stores its response in
 * the write's own transaction.
 */
export interface IdempotentWrite {
  /**
   * Stores `reply` as the key's response with `client`, inside the transaction of the write it
   * answers. When a concurrent request with the key committed first it throws, so that the write
   * rolls back and the pipeline answers that request's response instead.
   */
  record(client: PoolClient, reply: Reply): Promise<void>;
}

/** Thrown by {@link IdempotentWrite.record} when another request with the key committed first. */
class KeyTakenMeanwhile extends Error {
  constructor() {
    super('a concurrent request with the same Idempotency-Key committed first');
  }
}

class KeyedWrite implements IdempotentWrite {
  recorded = false;

  constructor(
    private readonly store: IdempotencyStore,
    private readonly orgId: number,
    private readonly key: string,
    private readonly hash: RequestHash,
  ) {}

  async record(client: PoolClient, reply: Reply): Promise<void> {
    const stored = { status: reply.status, headers: reply.headers ?? {}, body: reply.body ?? '' };
    if (!(await this.store.record(client, this.orgId, this.key, this.hash.value, stored)))
      throw new KeyTakenMeanwhile();
    this.recorded = true;
  }
}

/**
 * The answer to a write with `key` (API.md §5): the key's first response, replayed byte for byte
 * with its headers and `Idempotent-Replayed: true` (the same key with another request is a 422); else
 * what `write` answers, given the {@link IdempotentWrite} through which it records that answer in its
 * transaction. A write that failed while a concurrent request with the key committed (it lost the key,
 * or lost the race for what that request changed: a 412 under If-Match, a 409 for a chosen id) answers
 * that request's response. A successful answer left unrecorded is a defect of the operation (a 500).
 */
export async function idempotentReply(
  store: IdempotencyStore,
  orgId: number,
  key: string,
  hash: RequestHash,
  write: (idempotency: IdempotentWrite) => Promise<Reply>,
): Promise<Reply> {
  const replay = async (): Promise<Reply | undefined> => {
    const stored = await store.find(orgId, key, hash);
    return stored && { ...stored, headers: { ...stored.headers, 'Idempotent-Replayed': 'true' } };
  };
  const replayed = await replay();
  if (replayed) return replayed;
  const keyed = new KeyedWrite(store, orgId, key, hash);
  let reply: Reply;
  try {
    reply = await write(keyed);
  } catch (error) {
    // Nothing of a failed write is kept, its record included: a record now is a concurrent request's.
    const winner = await replay().catch((failed: unknown) => {
      if (isDomainError(failed)) throw failed;
      return undefined;
    });
    if (winner) return winner;
    throw error;
  }
  if (reply.status < 300 && !keyed.recorded)
    throw new Error('the write answered without recording its response to its Idempotency-Key');
  return reply;
}
