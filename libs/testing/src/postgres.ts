import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { resolve } from 'node:path';
import pg from 'pg';
import { PostgresSession, createPool, type Logger, type Pool } from '@ofp/runtime';
import { startEmbeddedPostgres } from '@ofp/standalone';
import { testLogger } from './logger.js';
import { freePort } from './ports.js';

/** The folder where test infrastructure keeps its state between runs (git-ignored). */
export const CACHE_DIR = fileURLToPath(new URL('../../../.cache', import.meta.url));

/**
 * The Postgres that tests use: `DATABASE_URL` when set, else an embedded cluster kept in
 * `.cache/<folder>` (`test-postgres` by default) and reused across runs (a cluster left running by an
 * interrupted run is stopped first). Databases that earlier interrupted runs left behind are dropped.
 */
export async function startTestPostgres(
  logger: Logger,
  folder = 'test-postgres',
): Promise<{ url: string; stop: () => Promise<void> }> {
  const given = process.env.DATABASE_URL;
  if (given) return { url: given, stop: async () => {} };
  const running = await startEmbeddedPostgres({
    dataDir: resolve(CACHE_DIR, folder),
    port: await freePort(),
    logger,
    ephemeral: true,
  });
  await dropTestDatabases(running.url);
  return running;
}

const TEST_DATABASE_PREFIX = 'test_';

async function dropTestDatabases(url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ datname: string }>(
      'SELECT datname FROM pg_database WHERE datname LIKE $1',
      [`${TEST_DATABASE_PREFIX}%`],
    );
    for (const { datname } of rows) await client.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

export interface TestDatabase {
  /** Connection string of a database of its own. */
  url: string;
  pool: Pool;
  /**
   * A Postgres session on it (LISTEN, advisory locks) as a process has one, connected when first
   * used; a test that plays two processes makes a second one.
   */
  session: PostgresSession;
  /** Closes the pool and the session, and drops the database. */
  drop(): Promise<void>;
}

/**
 * A fresh, empty database for one test file, so that test files run in parallel without seeing each
 * other's rows. Needs the `DATABASE_URL` that the jest global setup exports.
 */
export async function createTestDatabase(): Promise<TestDatabase> {
  const serverUrl = process.env.DATABASE_URL;
  if (!serverUrl)
    throw new Error(
      'DATABASE_URL is not set: run integration tests through jest (its global setup starts Postgres)',
    );
  const name = `${TEST_DATABASE_PREFIX}${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${name}"`);
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  const pool = createPool({ connectionString: url.toString(), applicationName: 'test', max: 20 });
  const session = new PostgresSession({
    connectionString: url.toString(),
    applicationName: 'test-session',
    logger: testLogger('test-session'),
  });
  return {
    url: url.toString(),
    pool,
    session,
    async drop() {
      await session.stop();
      await pool.end();
      const client = new pg.Client({ connectionString: serverUrl });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await client.end();
    },
  };
}

/**
 * A database of its own on the test Postgres (started if need be), for benchmarks and scripts that run
 * outside jest: `stop` drops it and stops what was started.
 */
export async function startScratchDatabase(
  logger: Logger,
  prefix: string,
): Promise<{ url: string; stop: () => Promise<void> }> {
  const server = await startTestPostgres(logger);
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: server.url });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${name}"`);
  const url = new URL(server.url);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async stop() {
      await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await admin.end();
      await server.stop();
    },
  };
}
