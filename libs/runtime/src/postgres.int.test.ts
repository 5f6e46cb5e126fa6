import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createLogger } from './logger.js';
import { migrate } from './migrations.js';
import { DatabaseTimeout, createPool, inTransaction, withDatabaseDeadline, type Pool } from './postgres.js';

describe('createPool', () => {
  it('survives a checked-out client losing its connection between statements, and goes on serving', async () => {
    const pool = createPool({
      connectionString: process.env.DATABASE_URL!,
      applicationName: 'pool-test',
      max: 2,
    });
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL! });
    await admin.connect();
    try {
      // Terminated while idle in its transaction, as every backend is when Postgres crashes: the FATAL
      // arrives with no statement in flight, and pg emits it as an 'error' event on the client.
      const transaction = inTransaction(pool, async (client) => {
        const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        const closed = new Promise((resolve) => client.once('end', resolve));
        await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
        await closed;
        await client.query('SELECT 1');
      });
      await expect(transaction).rejects.toThrow();
      const { rows } = await pool.query<{ one: number }>('SELECT 1 AS one');
      expect(rows).toEqual([{ one: 1 }]);
    } finally {
      await admin.end();
      await pool.end();
    }
  });
});

describe('database timeouts (API.md §3: 503 within 5 s while the database hangs)', () => {
  const url = process.env.DATABASE_URL!;
  let pool: Pool;
  beforeEach(() => {
    pool = createPool({
      connectionString: url,
      applicationName: 'timeouts-test',
      max: 1,
      timeouts: { statementMs: 1_000, lockMs: 300, idleInTransactionMs: 1_000, connectMs: 5_000 },
    });
  });
  afterEach(async () => {
    await pool.end();
  });

  const timed = async (work: () => Promise<unknown>) => {
    const begun = Date.now();
    const error = await work().then(
      () => undefined,
      (failure: unknown) => failure,
    );
    return { error, ms: Date.now() - begun };
  };

  it("fails a statement at the request's deadline, drops its connection, and goes on with a new one", async () => {
    const { rows } = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    const { error, ms } = await timed(() =>
      withDatabaseDeadline(Date.now() + 200, () => pool.query('SELECT pg_sleep(0.8)')),
    );
    expect(error).toBeInstanceOf(DatabaseTimeout);
    expect(ms).toBeLessThan(700);
    // A new connection, not the one whose statement was left unanswered.
    const after = await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    expect(after.rows[0]!.pid).not.toBe(rows[0]!.pid);
  });

  it("ends a wait for a connection at the request's deadline, and the connection is not lost to the pool", async () => {
    const held = await pool.connect();
    const { error, ms } = await timed(() =>
      withDatabaseDeadline(Date.now() + 200, () => pool.query('SELECT 1')),
    );
    expect(error).toBeInstanceOf(DatabaseTimeout);
    expect(ms).toBeLessThan(700);
    held.release();
    expect((await pool.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
    expect(pool.totalCount).toBe(1);
  });

  it('rolls back a transaction whose statement passed the deadline, and hands nobody its connection', async () => {
    const { error } = await timed(() =>
      withDatabaseDeadline(Date.now() + 300, () =>
        inTransaction(pool, async (client) => {
          await client.query('CREATE TABLE IF NOT EXISTS timeouts_test_rows (n int)');
          await client.query('INSERT INTO timeouts_test_rows VALUES (1)');
          await client.query('SELECT pg_sleep(0.8)');
        }),
      ),
    );
    expect(error).toBeInstanceOf(DatabaseTimeout);
    // The server, once it notices the closed connection, rolls the transaction back.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const { rows } = await pool.query<{ exists: boolean }>(
      "SELECT to_regclass('timeouts_test_rows') IS NOT NULL AS exists",
    );
    expect(rows).toEqual([{ exists: false }]);
  });

  it('has the server cancel a long statement (57014) and a long lock wait (55P03)', async () => {
    const statement = await timed(() => pool.query('SELECT pg_sleep(5)'));
    expect(statement.error).toMatchObject({ code: '57014' });
    const other = new pg.Client({ connectionString: url });
    await other.connect();
    try {
      await other.query('SELECT pg_advisory_lock(424242)');
      const lock = await timed(() => pool.query('SELECT pg_advisory_lock(424242)'));
      expect(lock.error).toMatchObject({ code: '55P03' });
    } finally {
      await other.end();
    }
  });

  it("applies a migration that outlasts the pool's statement timeout", async () => {
    const directory = await mkdtemp(join(tmpdir(), 'migrations-'));
    await writeFile(join(directory, '001_slow.sql'), 'SELECT pg_sleep(1.5)');
    const component = `slow-${Date.now()}`;
    const logger = createLogger({ name: 'test', level: 'silent' });
    await migrate(pool, { component, directory, logger });
    await pool.query('DELETE FROM public.schema_migrations WHERE component = $1', [component]);
  });
});
