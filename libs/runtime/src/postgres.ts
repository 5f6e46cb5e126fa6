import { createHash } from 'node:crypto';
import pg from 'pg';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

// BIGINT (int8) columns are global positions and counters that fit in a JS number for any realistic
// event volume (2^53); parse them as numbers rather than strings.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

export interface PoolOptions {
  connectionString: string;
  max?: number;
  applicationName: string;
  /**
   * Plan named statements once, generically (`plan_cache_mode = force_generic_plan`), for a pool whose
   * statements Postgres would otherwise plan at every call for no better plan (see `prepared`).
   */
  genericPlans?: boolean;
}

export function createPool(options: PoolOptions): Pool {
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.max ?? 10,
    application_name: options.applicationName,
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
    // Retire a connection after this many queries, and with it the prepared statements it keeps.
    maxUses: 20_000,
  });
  // An idle client losing its connection must not crash the process; the next checkout reconnects.
  pool.on('error', () => {});
  pool.on('connect', (client) => {
    // Nor a checked-out one (pg-pool listens only while a client is idle): a Postgres that crashes
    // sends every backend's client a FATAL, which arrives between the statements of a transaction as
    // often as not. The statement in flight or the next one fails; released with it, the client goes.
    client.on('error', () => {});
    // Queued on the new connection before any statement of the pool's users.
    if (options.genericPlans) client.query('SET plan_cache_mode = force_generic_plan').catch(() => {});
  });
  return pool;
}

/** The names of the statements {@link prepared} has named, by text. */
const statementNames = new Map<string, string>();
/** Texts named at most; a text past them is still prepared, only named again when used. */
const NAMES_KEPT = 10_000;

/**
 * A named statement: Postgres parses it once per connection and, after five runs, plans it once
 * (a generic plan) instead of at every call. For the statements run with every write (appends, the
 * projector's, the readers'), planning cost Postgres more than running them: 990 µs of planning
 * against 378 µs of execution per person write (pg_stat_statements). The name is the text's digest,
 * so one text has one name on every connection; each connection keeps its statements until the
 * pool retires it (`maxUses`).
 */
export function prepared(text: string, values: readonly unknown[]): pg.QueryConfig & { name: string } {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `s_${createHash('sha1').update(text).digest('base64url')}`;
    if (statementNames.size < NAMES_KEPT) statementNames.set(text, name);
  }
  return { name, text, values: [...values] };
}

/** Runs `work` in one transaction on one connection, committing on success and rolling back on error. */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}
