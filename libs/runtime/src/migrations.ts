import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Pool } from './postgres.js';
import type { Logger } from './logger.js';

const FILE = /^(\d{3,})_[a-z0-9_]+\.sql$/;

/**
 * Applies versioned plain-SQL migrations (`001_create_events.sql`, ...) from `directory`, each once
 * and in its own transaction, recorded in `public.schema_migrations` under `component`. A session
 * advisory lock serializes processes that start at the same moment: the second waits, then sees the
 * versions the first applied and skips them.
 */
export async function migrate(
  pool: Pool,
  options: { component: string; directory: string; logger: Logger },
): Promise<void> {
  const files = (await readdir(options.directory)).filter((f) => FILE.test(f)).sort();
  const client = await pool.connect();
  try {
    await client.query("SELECT pg_advisory_lock(hashtext('ofp:schema_migrations'))");
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
    for (const file of files) {
      const version = FILE.exec(file)![1]!;
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
    await client.query("SELECT pg_advisory_unlock(hashtext('ofp:schema_migrations'))").catch(() => {});
    client.release();
  }
}
