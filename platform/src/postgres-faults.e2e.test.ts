// @runs-alone: compares write latency before and after a Postgres crash, under its own load
import { randomBytes } from 'node:crypto';
import { readdir, readFile, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { startEmbeddedPostgres, type RunningPostgres } from '@ofp/standalone';
import {
  CACHE_DIR,
  RUN_MODES,
  createIntegrator,
  freePort,
  startPlatform,
  testLogger,
  type Integrator,
  type RunningPlatform,
} from '@ofp/testing';
import pg from 'pg';

/**
 * An embedded Postgres of the test's own (the standalone mode's, with its watchdog that starts a
 * dead postmaster again), to crash and to freeze without disturbing the other test files.
 */
interface FaultyPostgres {
  readonly url: string;
  /** SIGKILL of the postmaster: a crash, after which the watchdog starts it again (crash recovery). */
  crash(): Promise<void>;
  /** SIGSTOP of the postmaster and every backend: a database that hangs, TCP connections left open. */
  freeze(): Promise<void>;
  /** SIGCONT of them all. */
  thaw(): Promise<void>;
  stop(): Promise<void>;
}

async function startFaultyPostgres(): Promise<FaultyPostgres> {
  const dataDir = resolve(CACHE_DIR, `fault-postgres-${randomBytes(4).toString('hex')}`);
  const running: RunningPostgres = await startEmbeddedPostgres({
    dataDir,
    port: await freePort(),
    logger: testLogger('fault-postgres'),
  });
  const admin = new pg.Client({ connectionString: running.url });
  await admin.connect();
  await admin.query('CREATE DATABASE platform');
  await admin.end();
  const url = new URL(running.url);
  url.pathname = '/platform';
  const postmaster = async (): Promise<number> =>
    Number((await readFile(join(running.location, 'postmaster.pid'), 'utf8')).split('\n')[0]);
  let frozen: number[] = [];
  return {
    url: url.toString(),
    async crash() {
      process.kill(await postmaster(), 'SIGKILL');
    },
    async freeze() {
      const pid = await postmaster();
      // The postmaster first, so that it forks no backend the list below would miss.
      process.kill(pid, 'SIGSTOP');
      frozen = [pid, ...(await childrenOf(pid))];
      for (const child of frozen.slice(1)) process.kill(child, 'SIGSTOP');
    },
    async thaw() {
      for (const pid of [...frozen].reverse()) process.kill(pid, 'SIGCONT');
      frozen = [];
    },
    async stop() {
      for (const pid of frozen) process.kill(pid, 'SIGCONT');
      await running.stop();
      await rm(running.location, { recursive: true, force: true });
      await rm(dataDir, { recursive: true, force: true });
      await rm(`${dataDir}.password`, { force: true });
    },
  };
}

/** The processes whose parent is `pid` (from /proc). */
async function childrenOf(pid: number): Promise<number[]> {
  const children: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses, so read after the last ')'.
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (parent === pid) children.push(Number(entry));
  }
  return children;
}

interface Write {
  readonly startedAt: number;
  readonly ms: number;
  readonly status: number | 'error';
}

/** Writers that create people one after another until stopped, each write timed. */
function writeLoad(integrator: Integrator, writers: number): { writes: Write[]; stop: () => Promise<void> } {
  const writes: Write[] = [];
  let running = true;
  const loops = Array.from({ length: writers }, async (_, writer) => {
    for (let i = 0; running; i++) {
      const startedAt = Date.now();
      const status = await integrator
        .request('POST', '/v2/people', { body: { last_name: `Writer ${writer} ${i}` } })
        .then(
          (response) => response.status,
          () => 'error' as const,
        );
      writes.push({ startedAt, ms: Date.now() - startedAt, status });
      // A refused write (the database away) is tried again a little later, as a client would.
      if (status !== 201) await new Promise((r) => setTimeout(r, 100));
    }
  });
  return {
    writes,
    async stop() {
      running = false;
      await Promise.all(loops);
    },
  };
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/** The median of the acknowledged writes that started in [from, to). */
function medianOf(writes: readonly Write[], from: number, to: number): { median: number; count: number } {
  const inWindow = writes.filter((w) => w.status === 201 && w.startedAt >= from && w.startedAt < to);
  return { median: median(inWindow.map((w) => w.ms)), count: inWindow.length };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The value of an unlabelled metric in a process's scrape, summed over its label sets. */
async function metric(url: string, name: string): Promise<number | undefined> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const samples = text
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .map((line) => Number(line.split(' ').pop()));
  return samples.length === 0 ? undefined : samples.reduce((a, b) => a + b, 0);
}

/**
 * API.md §12: while Postgres is down or hangs, requests answer 503 with Retry-After within 5 s; when
 * it is back, the platform returns to its earlier latency within 30 s with no restart (every LISTEN
 * connection, pool and consumer reconnects by itself). Issue 23: after a crash of the embedded
 * Postgres every write stayed at about 800 ms (10 to 17 ms before), for good, because the LISTEN
 * connections never listened again.
 */
describe.each(RUN_MODES)('Postgres crashes and hangs ($mode)', ({ mode }) => {
  let postgres: FaultyPostgres;
  let platform: RunningPlatform;
  let integrator: Integrator;
  beforeAll(async () => {
    postgres = await startFaultyPostgres();
    platform = await startPlatform({
      databaseUrl: postgres.url,
      ...(mode === 'distributed'
        ? {
            kafkaBrokers: (process.env.KAFKA_BROKERS ?? '').split(','),
            env: { KAFKA_TOPIC_PREFIX: `test.faults.${randomBytes(4).toString('hex')}.` },
          }
        : {}),
    });
    integrator = await createIntegrator(platform, { name: 'Faults' });
  }, 180_000);
  afterAll(async () => {
    await postgres?.thaw();
    await platform?.stop();
    await postgres?.stop();
  });

  it('returns to its write latency within 30 s of a crash (SIGKILL of the postmaster) under load', async () => {
    const load = writeLoad(integrator, 2);
    try {
      // Warm up, then the baseline.
      await sleep(5_000);
      const baselineFrom = Date.now();
      await sleep(10_000);
      const crashedAt = Date.now();
      await postgres.crash();
      await sleep(30_000);
      const before = medianOf(load.writes, baselineFrom, crashedAt);
      const after = medianOf(load.writes, crashedAt + 20_000, crashedAt + 30_000);
      const report = `before: median ${before.median} ms of ${before.count} writes; 20-30 s after the crash: median ${after.median} ms of ${after.count}`;
      process.stdout.write(`${mode}: ${report}\n`);
      expect({ report, after: after.count > 0 && after.median <= 1.5 * before.median }).toEqual({
        report,
        after: true,
      });
    } finally {
      await load.stop();
    }
    for (const url of Object.values(platform.processes)) {
      const reconnects = await metric(url, 'postgres_listener_reconnects_total');
      if (reconnects === undefined) continue;
      expect({ url, reconnects: reconnects > 0 }).toEqual({ url, reconnects: true });
      expect({ url, connected: await metric(url, 'postgres_listener_connected') }).toEqual({
        url,
        connected: 1,
      });
    }
  }, 120_000);

  it('answers writes and reads 503 with Retry-After within 5 s while Postgres hangs (SIGSTOP), and recovers by itself (SIGCONT)', async () => {
    const created = await integrator.request<{ id: number }>('POST', '/v2/people', {
      body: { last_name: 'Before the freeze' },
    });
    expect(created.status).toBe(201);
    const id = created.body.results.id;
    /**
     * A request's status, Retry-After, OAuth error code (none from the envelope) and time; 'no answer'
     * after 10 s (the test's bound is 5 s).
     */
    const timed = async (request: () => ReturnType<Integrator['request']>) => {
      const begun = Date.now();
      let timer: NodeJS.Timeout | undefined;
      const response = await Promise.race([
        request(),
        new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), 10_000))),
      ]);
      clearTimeout(timer);
      return {
        status: response?.status ?? 'no answer',
        retryAfter: response?.headers.get('retry-after') ?? null,
        error: (response?.body as { error?: string } | null | undefined)?.error ?? null,
        ms: Date.now() - begun,
      };
    };
    const basic = `Basic ${Buffer.from(`${integrator.clientId}:${integrator.clientSecret}`).toString('base64')}`;
    const round = () =>
      Promise.all([
        timed(() => integrator.request('POST', '/v2/people', { body: { last_name: 'Frozen' } })),
        timed(() => integrator.request('PATCH', `/v2/people/${id}`, { body: { first_name: 'Frozen' } })),
        timed(() => integrator.request('GET', `/v2/people/${id}`)),
        timed(() => integrator.request('GET', `/v2/people?q=${encodeURIComponent('{"limit":5}')}`)),
        // The token endpoint answers in RFC 6749 §5.2's format, its 503 too (API.md §7).
        timed(() =>
          integrator.request('POST', '/oauth/token', {
            body: 'grant_type=client_credentials',
            headers: { authorization: basic, 'content-type': 'application/x-www-form-urlencoded' },
          }),
        ),
      ]);
    await postgres.freeze();
    let rounds;
    try {
      // At once (the pool's connections hang mid-query), and again once they are all stuck or gone.
      rounds = [await round(), await round(), (await sleep(3_000), await round())];
    } finally {
      await postgres.thaw();
    }
    const slowest = Math.max(...rounds.flat().map((answer) => answer.ms));
    process.stdout.write(
      `${mode}: while frozen, ${rounds.flat().length} requests answered, the slowest in ${slowest} ms\n`,
    );
    for (const answers of rounds)
      answers.forEach((answer, i) =>
        expect({ ...answer, fast: answer.ms < 5_000 }).toEqual({
          status: 503,
          retryAfter: expect.stringMatching(/^\d+$/) as unknown,
          error: i === answers.length - 1 ? 'temporarily_unavailable' : null,
          ms: answer.ms,
          fast: true,
        }),
      );
    // Back by itself: a write is answered and read back within 30 s of the thaw.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const write = await integrator.request<{ id: number }>('POST', '/v2/people', {
        body: { last_name: 'After the thaw' },
      });
      if (write.status === 201) {
        const read = await integrator.request('GET', `/v2/people/${write.body.results.id}`);
        expect(read.status).toBe(200);
        break;
      }
      if (Date.now() > deadline)
        throw new Error(`no write answered within 30 s of the thaw (last ${write.status})`);
      await sleep(200);
    }
  }, 120_000);
});
