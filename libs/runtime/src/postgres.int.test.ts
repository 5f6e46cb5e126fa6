// @runs-alone: a statement timed out within 700 ms
import { spawnSync } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Registry } from 'prom-client';
import { createLogger } from './logger.js';
import { migrate } from './migrations.js';
import {
  DatabaseTimeout,
  createPool,
  inTransaction,
  isDependencyDown,
  prepared,
  statementName,
  withDatabaseDeadline,
  type Pool,
} from './postgres.js';

describe('createPool', () => {
  // pg warns once per process of a client given a query while it runs one: every start printed it, from
  // the SET of generic plans queued on each new connection. Run in a process of its own, whose stderr
  // shows the warning (jest's sandbox does not pass the process's warning events to a test).
  it('plans generically and takes the settings given when asked, from the connection start-up, with no statement queued beside the first', async () => {
    const script = `
      import { createPool } from ${JSON.stringify(new URL('../dist/postgres.js', import.meta.url).href)};
      const pool = createPool({ connectionString: process.env.DATABASE_URL, applicationName: 'generic-plans-test', max: 3, genericPlans: true, settings: { enable_seqscan: 'off' } });
      const modes = await Promise.all(Array.from({ length: 6 }, () => pool.query("SELECT current_setting('plan_cache_mode') AS plans, current_setting('enable_seqscan') AS seqscan")));
      console.log(JSON.stringify(modes.map(({ rows }) => rows[0])));
      await pool.end();
    `;
    // This file's environment: its jest worker's DATABASE_URL is set there, not in the worker process's.
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      env: { ...process.env },
    });
    expect({ status: child.status, stderr: child.stderr }).toEqual({ status: 0, stderr: '' });
    expect(JSON.parse(child.stdout)).toEqual(
      Array.from({ length: 6 }, () => ({ plans: 'force_generic_plan', seqscan: 'off' })),
    );
  });

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
      // What pg answers then is the database being away (a 503), not a fault of the request (a 500).
      const error: unknown = await transaction.catch((failure: unknown) => failure);
      expect({ message: (error as Error).message, down: isDependencyDown(error) }).toEqual({
        message: expect.stringMatching(/not queryable/),
        down: true,
      });
      const { rows } = await pool.query<{ one: number }>('SELECT 1 AS one');
      expect(rows).toEqual([{ one: 1 }]);
    } finally {
      await admin.end();
      await pool.end();
    }
  });
});

describe("a pool's connection after a failed statement", () => {
  let pool: Pool;
  let metrics: Registry;
  beforeEach(() => {
    metrics = new Registry();
    pool = createPool({
      connectionString: process.env.DATABASE_URL!,
      applicationName: 'reuse-test',
      max: 1,
      metrics,
    });
  });
  afterEach(() => pool.end());

  const backend = async (): Promise<number> =>
    (await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  const opened = async (): Promise<number | undefined> =>
    (await metrics.getSingleMetric('postgres_pool_connections_opened_total')!.get()).values.find(
      ({ labels }) => labels.pool === 'reuse-test',
    )?.value;

  it('is kept when the server refused the statement, its session and named statements with it', async () => {
    const pid = await backend();
    // A temporary table lives as long as its session: still there, the session was not replaced.
    await pool.query('CREATE TEMPORARY TABLE taken (id int PRIMARY KEY)');
    await pool.query(prepared('INSERT INTO taken (id) VALUES ($1)', [1]));
    const refused = [
      await pool
        .query(prepared('INSERT INTO taken (id) VALUES ($1)', [1]))
        .catch((error: { code: string }) => error.code),
      await pool.query('SELECT 1 / 0').catch((error: { code: string }) => error.code),
    ];
    await pool.query(prepared('INSERT INTO taken (id) VALUES ($1)', [2]));
    const { rows } = await pool.query<{ id: number }>('SELECT id FROM taken ORDER BY id');
    expect({ refused, rows, pid: await backend(), opened: await opened() }).toEqual({
      refused: ['23505', '22012'],
      rows: [{ id: 1 }, { id: 2 }],
      pid,
      opened: 1,
    });
  });

  it('is dropped when the statement left its session in a failed transaction, or the connection failed', async () => {
    const first = await backend();
    const inFailedTransaction = await pool
      .query('BEGIN; SELECT 1 / 0')
      .catch((error: { code: string }) => error.code);
    const second = await backend();
    const terminated = await pool
      .query('SELECT pg_terminate_backend(pg_backend_pid())')
      .catch((error: Error) => isDependencyDown(error));
    const third = await backend();
    expect({ inFailedTransaction, terminated, opened: await opened() }).toEqual({
      inFailedTransaction: '22012',
      terminated: true,
      opened: 3,
    });
    expect(new Set([first, second, third]).size).toBe(3);
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

  it('gives a statement that waited for a connection its own deadline, not that of whoever released it', async () => {
    // The pool hands a released connection to the next waiter inside the releaser's call: a wait without
    // a deadline (read-your-writes' checks) ran its statement under the nearly spent deadline of the
    // request that released, and failed within 1 ms under load (fulfillment.e2e's parallel writes).
    const held = await withDatabaseDeadline(Date.now() + 400, () => pool.connect());
    const waiting = timed(() => withDatabaseDeadline(undefined, () => pool.query('SELECT pg_sleep(0.3)')));
    await new Promise((resolve) => setTimeout(resolve, 300));
    withDatabaseDeadline(Date.now() + 50, () => held.release());
    const { error } = await waiting;
    expect(error).toBeUndefined();
  });

  it('gives a statement served from an idle connection its own deadline, not that of a release before its turn', async () => {
    // A waiter with an idle connection waits for the pool's next pulse; a release before it serves the
    // waiter inside the releaser's call, as with no idle connection (the test above).
    const two = createPool({
      connectionString: url,
      applicationName: 'timeouts-test-idle',
      max: 2,
      timeouts: { statementMs: 1_000, lockMs: 300, idleInTransactionMs: 1_000, connectMs: 5_000 },
    });
    try {
      const [held, idle] = await Promise.all([two.connect(), two.connect()]);
      idle.release();
      expect(two.idleCount).toBe(1);
      const waiting = timed(() =>
        withDatabaseDeadline(Date.now() + 5_000, () => two.query('SELECT pg_sleep(0.3)')),
      );
      withDatabaseDeadline(Date.now() + 50, () => held.release());
      expect((await waiting).error).toBeUndefined();
    } finally {
      await two.end();
    }
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

describe('statementName', () => {
  it('says what a statement does and to which table, unique by its text, within 63 bytes', () => {
    const insert = statementName('INSERT INTO es.events (stream_id) VALUES ($1)');
    expect(insert).toMatch(/^insert_es\.events_[\w-]{10}$/);
    expect(statementName('SELECT * FROM read.people WHERE id = $1')).toMatch(/^select_read\.people_/);
    expect(statementName('WITH x AS (SELECT 1) UPDATE api.keys SET a = 1')).toMatch(/^update_api\.keys_/);
    expect(
      statementName('WITH i AS (INSERT INTO es.events SELECT * FROM x RETURNING 1) SELECT 1 FROM i'),
    ).toMatch(/^insert_es\.events_/);
    expect(statementName('INSERT INTO es.events (stream_id) VALUES ($2)')).not.toBe(insert);
    expect(statementName(`SELECT 1 FROM ${'t'.repeat(200)}`).length).toBeLessThanOrEqual(63);
  });
});

describe('bigint values', () => {
  it('come as numbers up to 2^53 - 1 and as exact BigInts beyond, never as rounded numbers', async () => {
    const pool = createPool({ connectionString: process.env.DATABASE_URL!, applicationName: 'pool-test' });
    try {
      const { rows } = await pool.query<{ safe: unknown; beyond: unknown; lowest: unknown }>(
        'SELECT 9007199254740991::bigint AS safe, 9223372036854775807::bigint AS beyond, (-9223372036854775807 - 1)::bigint AS lowest',
      );
      expect(rows[0]).toEqual({
        safe: 9007199254740991,
        beyond: 9223372036854775807n,
        lowest: -9223372036854775808n,
      });
    } finally {
      await pool.end();
    }
  });
});
