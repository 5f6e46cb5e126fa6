import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createLogger } from './logger.js';
import { migrate, schemaTransaction } from './migrations.js';
import { createPool, type Pool } from './postgres.js';

// A database of its own, made here rather than with @ofp/testing, which builds on this package.
describe('migrate', () => {
  const server = process.env.DATABASE_URL!;
  const name = `test_${randomBytes(6).toString('hex')}`;
  const db: { pool: Pool } = { pool: undefined as unknown as Pool };
  const admin = async (sql: string): Promise<void> => {
    const client = new pg.Client({ connectionString: server });
    await client.connect();
    await client.query(sql);
    await client.end();
  };
  beforeAll(async () => {
    await admin(`CREATE DATABASE ${name}`);
    const url = new URL(server);
    url.pathname = `/${name}`;
    db.pool = createPool({ connectionString: url.toString(), applicationName: 'migrations-test' });
  });
  afterAll(async () => {
    await db.pool.end();
    await admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  });

  it('applies each file once, in order, even when processes start at the same moment', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'migrations-'));
    await writeFile(join(directory, '001_create.sql'), 'CREATE TABLE things (id int)');
    await writeFile(join(directory, '002_add.sql'), 'ALTER TABLE things ADD COLUMN name text');
    await writeFile(join(directory, 'README.txt'), 'not a migration');
    const logger = createLogger({ name: 'test', level: 'silent' });
    await Promise.all(
      Array.from({ length: 5 }, () => migrate(db.pool, { component: 'things', directory, logger })),
    );
    const applied = await db.pool.query<{ version: string }>(
      "SELECT version FROM schema_migrations WHERE component = 'things' ORDER BY version",
    );
    expect(applied.rows.map((r) => r.version)).toEqual(['001', '002']);
    const columns = await db.pool.query<{ column_name: string }>(
      "SELECT column_name FROM information_schema.columns WHERE table_name = 'things' ORDER BY ordinal_position",
    );
    expect(columns.rows.map((r) => r.column_name)).toEqual(['id', 'name']);
  });

  it('rolls a failing migration back and names it', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'migrations-'));
    await writeFile(join(directory, '001_broken.sql'), 'CREATE TABLE half (id int); SELECT 1/0');
    const logger = createLogger({ name: 'test', level: 'silent' });
    await expect(migrate(db.pool, { component: 'broken', directory, logger })).rejects.toThrow(
      /broken\/001_broken.sql/,
    );
    expect(
      (await db.pool.query("SELECT 1 FROM information_schema.tables WHERE table_name = 'half'")).rowCount,
    ).toBe(0);
  });

  it('lays out start-up tables once when replicas start at the same moment (schemaTransaction)', async () => {
    // Without the lock, concurrent CREATE TABLE IF NOT EXISTS fails on pg_type's unique index (the
    // chaos run's two dispatcher replicas, laying out their idempotency table).
    await db.pool.query('CREATE SCHEMA starting');
    const layOut = `
      CREATE TABLE IF NOT EXISTS starting.idempotency_keys (org_id bigint, key text, PRIMARY KEY (org_id, key));
      CREATE INDEX IF NOT EXISTS idempotency_keys_key ON starting.idempotency_keys (key);`;
    const layOuts = await Promise.allSettled(
      Array.from({ length: 8 }, () =>
        schemaTransaction(db.pool, async (client) => {
          await client.query(layOut);
        }),
      ),
    );
    expect(layOuts.filter((result) => result.status === 'rejected')).toEqual([]);
    const { rowCount } = await db.pool.query(
      "SELECT 1 FROM information_schema.tables WHERE table_schema = 'starting' AND table_name = 'idempotency_keys'",
    );
    expect(rowCount).toBe(1);
  });
});
