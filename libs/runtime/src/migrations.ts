import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { inTransaction, withDatabaseDeadline, type Pool, type PoolClient } from './postgres.js';
import type { Logger } from './logger.js';

const FILE = /^(\d{3,})_[a-z0-9_]+\.sql$/;
/** The lock that serializes schema changes across processes: migrations, and {@link schemaTransaction}. */
const SCHEMA_LOCK = "hashtext('ofp:schema_migrations')";
/**
 * Schema changes may take minutes on a large database (an index built), and wait as long for the
 * lock while another process applies them: no statement, lock or client-side timeout applies.
 */
const unbounded = (scope: 'SESSION' | 'LOCAL'): string =>
  `SET ${scope} statement_timeout = 0; SET ${scope} lock_timeout = 0`;

/**
 * Applies versioned plain-SQL migrations (`001_create_events.sql`, ...) from `directory`, each once
 * and in its own transaction, recorded in `public.schema_migrations` under `component`. A session
 * advisory lock serializes processes that start at the same moment: the second waits, then sees the
 * versions the first applied and skips them.
 *
 * No migration builds an index `CONCURRENTLY`: Postgres refuses it in a transaction, and outside one it
 * would still deadlock here, since it waits for every transaction with an older snapshot to end, a
 * process waiting in `pg_advisory_lock` for this lock included (replicas start together); Postgres
 * breaks the deadlock by failing one side, the build leaving an invalid index. An index on a table that
 * can be large is created `IF NOT EXISTS` instead, so that an operator can build it concurrently before
 * the upgrade (docs/operations.md, "Upgrading").
 */
export function migrate(
  pool: Pool,
  options: { component: string; directory: string; logger: Logger },
): Promise<void> {
  return withDatabaseDeadline(Infinity, () => applyMigrations(pool, options));
}

async function applyMigrations(
  pool: Pool,
  options: { component: string; directory: string; logger: Logger },
): Promise<void> {
  const files = await migrationFiles(options.directory);
  const client = await pool.connect();
  try {
    await client.query(unbounded('SESSION'));
    await client.query(`SELECT pg_advisory_lock(${SCHEMA_LOCK})`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS public.schema_migrations (
         component text NOT NULL, version text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(),
         PRIMARY KEY (component, version))`,
    );
    const applied = await client.query<{ version: string }>(
      'SELECT version FROM public.schema_migrations WHERE component = $1',
      [options.component],
    );
    const done = new Set(applied.rows.map((r) => r.version));
    for (const { file, version } of files) {
      if (done.has(version)) continue;
      await client.query('BEGIN');
      try {
        await client.query(await readFile(join(options.directory, file), 'utf8'));
        await client.query('INSERT INTO public.schema_migrations (component, version) VALUES ($1, $2)', [
          options.component,
          version,
        ]);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK');
        throw new Error(`migration ${options.component}/${file} failed: ${(error as Error).message}`, {
          cause: error,
        });
      }
      options.logger.info({ component: options.component, migration: file }, 'migration applied');
    }
  } finally {
    await client.query(`SELECT pg_advisory_unlock(${SCHEMA_LOCK})`).catch(() => {});
    // Back to the pool's timeouts (those of the connection's start) before another user has it.
    const reset = await client.query('RESET statement_timeout; RESET lock_timeout').then(
      () => undefined,
      (error: Error) => error,
    );
    client.release(reset);
  }
}

/**
 * The migration files of `directory` in the order they apply, each with its version (the number its
 * name starts with). Two files with one version are refused, naming both: the second would fail on
 * `schema_migrations`' key only when it ran, after the first had changed the schema, and two branches
 * that each add the next number merge without a conflict.
 */
export async function migrationFiles(directory: string): Promise<{ file: string; version: string }[]> {
  const files = (await readdir(directory))
    .filter((file) => FILE.test(file))
    .sort()
    .map((file) => ({ file, version: FILE.exec(file)![1]! }));
  files.forEach(({ file, version }, i) => {
    const earlier = files.slice(0, i).find((other) => other.version === version);
    if (earlier) {
      throw new Error(`migrations ${earlier.file} and ${file} in ${directory} share version ${version}`);
    }
  });
  return files;
}

/**
 * Runs schema changes that every start makes (`CREATE TABLE IF NOT EXISTS`, declared columns) in one
 * transaction that holds the migrations' lock: `IF NOT EXISTS` does not make two such statements at the
 * same moment safe (the loser fails on `pg_type`'s unique index), and replicas start together.
 */
export async function schemaTransaction(
  pool: Pool,
  work: (client: PoolClient) => Promise<void>,
): Promise<void> {
  await withDatabaseDeadline(Infinity, () =>
    inTransaction(pool, async (client) => {
      await client.query(unbounded('LOCAL'));
      await client.query(`SELECT pg_advisory_xact_lock(${SCHEMA_LOCK})`);
      await work(client);
    }),
  );
}
