import { randomBytes, randomInt } from 'node:crypto';
import pg from 'pg';
import { Registry } from 'prom-client';
import { createLogger } from './logger.js';
import { PostgresSession } from './postgres-session.js';

// On the test server's own database: channels and lock keys of its own keep it apart from other files.
const url = process.env.DATABASE_URL!;
const logger = createLogger({ name: 'test', level: 'silent' });

async function onServer<R extends pg.QueryResultRow>(sql: string, values: unknown[] = []): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<R>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

/** Ends the session's connection from the server's side, as a Postgres restart or a network fault does. */
async function terminate(applicationName: string): Promise<void> {
  const rows = await onServer<{ done: boolean }>(
    'SELECT pg_terminate_backend(pid) AS done FROM pg_stat_activity WHERE application_name = $1',
    [applicationName],
  );
  expect(rows).toEqual([{ done: true }]);
}

async function until(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function sample(registry: Registry, name: string): Promise<number | undefined> {
  const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === name);
  return metric?.values[0]?.value;
}

describe('PostgresSession', () => {
  const sessions: PostgresSession[] = [];
  const session = (metrics?: Registry) => {
    const applicationName = `session-test-${randomBytes(4).toString('hex')}`;
    const made = new PostgresSession({
      connectionString: url,
      applicationName,
      logger,
      ...(metrics && { metrics }),
    });
    sessions.push(made);
    return { session: made, applicationName };
  };
  afterEach(async () => {
    await Promise.all(sessions.splice(0).map((each) => each.stop()));
  });

  it('listens again after its connection is lost, tells its listeners, and counts the reconnection', async () => {
    const metrics = new Registry();
    const { session: listening, applicationName } = session(metrics);
    const channel = `test_${randomBytes(4).toString('hex')}`;
    const payloads: string[] = [];
    let resumed = 0;
    await listening.listen(channel, {
      notify: (payload) => payloads.push(payload),
      resumed: () => resumed++,
    });
    await onServer(`SELECT pg_notify($1, 'first')`, [channel]);
    await until('the first notification', () => payloads.includes('first'));

    await terminate(applicationName);
    await until('resumed after the reconnection', () => resumed === 1);
    await onServer(`SELECT pg_notify($1, 'second')`, [channel]);
    await until('the notification after the reconnection', () => payloads.includes('second'));
    expect(await sample(metrics, 'postgres_listener_reconnects_total')).toBe(1);
    expect(await sample(metrics, 'postgres_listener_connected')).toBe(1);
  });

  it('loses its lock with its connection; another process may take it meanwhile; it takes it again once free', async () => {
    const key = `test-lock-${randomBytes(4).toString('hex')}`;
    const { session: first, applicationName } = session();
    const { session: second } = session();
    const mine = first.lock(key);
    const theirs = second.lock(key);
    expect(await mine.acquire()).toBe(true);
    expect(await theirs.acquire()).toBe(false);

    await terminate(applicationName);
    await until('the loss noticed', () => !mine.held());
    await until('taken by the other process', () => theirs.acquire());
    await until('connected again', () => first.connected());
    expect(await mine.acquire()).toBe(false);
    await theirs.release();
    expect(await mine.acquire()).toBe(true);
    expect(mine.held()).toBe(true);
  });

  it('sends its statements one at a time, before and after a reconnection (pg deprecates its own queue)', async () => {
    // The most statements in flight at once on any one connection, as pg's Client sees them.
    const inFlight = new Map<pg.Client, number>();
    let most = 0;
    const query = pg.Client.prototype.query;
    const counted = function (this: pg.Client, ...args: unknown[]) {
      const now = (inFlight.get(this) ?? 0) + 1;
      inFlight.set(this, now);
      most = Math.max(most, now);
      const result = (query as (...a: unknown[]) => Promise<unknown>).apply(this, args);
      const done = () => void inFlight.set(this, (inFlight.get(this) ?? 1) - 1);
      result.then(done, done);
      return result;
    };
    pg.Client.prototype.query = counted as typeof query;
    try {
      const { session: shared, applicationName } = session();
      const many = () =>
        Promise.all([
          ...Array.from({ length: 8 }, (_, i) =>
            shared.listen(`session_test_${randomInt(1, 2 ** 31 - 1)}_${i}`, { notify() {} }),
          ),
          ...Array.from({ length: 8 }, () =>
            shared.lock(['test-space', randomInt(1, 2 ** 31 - 1)]).acquire(),
          ),
        ]);
      await many();
      await terminate(applicationName);
      await until('connected again', () => shared.connected());
      await many();
      expect(most).toBe(1);
    } finally {
      pg.Client.prototype.query = query;
    }
  });

  it('gives a lock to one holder at a time within the process (session locks are reentrant on the server)', async () => {
    const { session: shared } = session();
    const key = ['test-space', randomInt(1, 2 ** 31 - 1)] as const;
    const one = shared.lock(key);
    const other = shared.lock(key);
    const [a, b] = await Promise.all([one.acquire(), other.acquire()]);
    expect([a, b].filter(Boolean)).toHaveLength(1);
    const [holder, waiting] = a ? [one, other] : [other, one];
    await holder.release();
    expect(await waiting.acquire()).toBe(true);
    // The server holds it once, for the holder: free for another process once released.
    await waiting.release();
    expect(await session().session.lock(key).acquire()).toBe(true);
  });
});
