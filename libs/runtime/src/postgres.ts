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
  return pool;
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
