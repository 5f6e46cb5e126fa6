// @runs-alone: waits up to 10 s for 503s while Postgres and a broker of its own are away, timed
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import {
  CACHE_DIR,
  RUN_MODES,
  createTestDatabase,
  spawnStandalone,
  startKafkaBroker,
  startPlatform,
  testLogger,
  waitUntil,
  type RunningKafka,
  type RunningPlatform,
  type StandaloneProcess,
  type TestDatabase,
} from '@ofp/testing';

/** Runs `sql` on the test run's Postgres server (not on a test database). */
async function onServer(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/**
 * API.md §3: `/readyz` is 503 while a dependency is down, in every TARGET, and 200 again once it is
 * back. The database "goes down" for the processes by refusing their connections (and dropping the
 * ones they hold), the way a Postgres that restarts or fails over looks to them.
 */
describe.each(RUN_MODES)('readiness while Postgres is away ($mode)', ({ mode }) => {
  let database: TestDatabase;
  let platform: RunningPlatform;
  beforeAll(async () => {
    database = await createTestDatabase();
    platform = await startPlatform({
      databaseUrl: database.url,
      ...(mode === 'distributed'
        ? {
            kafkaBrokers: (process.env.KAFKA_BROKERS ?? '').split(','),
            env: { KAFKA_TOPIC_PREFIX: `test.readiness.${Date.now()}.` },
          }
        : {}),
    });
  }, 120_000);
  afterAll(async () => {
    await platform.stop();
    await database.drop();
  });

  it('answers 503 in every process while Postgres refuses it, and 200 once it takes connections again', async () => {
    const name = new URL(database.url).pathname.slice(1);
    const urls = Object.values(platform.processes);
    for (const url of urls) expect((await fetch(`${url}/readyz`)).status).toBe(200);
    await onServer(`ALTER DATABASE "${name}" WITH ALLOW_CONNECTIONS false`);
    await onServer(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}'`);
    try {
      for (const url of urls) expect(await waitUntil(url, 503, undefined, 5_000)).toBeLessThan(5_000);
    } finally {
      await onServer(`ALTER DATABASE "${name}" WITH ALLOW_CONNECTIONS true`);
    }
    for (const url of urls) await waitUntil(url, 200, undefined, 30_000);
  }, 90_000);
});

describe('readiness of the Kafka consumers while the broker does not answer (distributed)', () => {
  let broker: RunningKafka;
  let database: TestDatabase;
  let platform: RunningPlatform;
  beforeAll(async () => {
    // A broker of its own: the test run's one must keep answering the other test files.
    broker = await startKafkaBroker({ cacheDir: CACHE_DIR, logger: testLogger('readiness-kafka') });
    database = await createTestDatabase();
    platform = await startPlatform({ databaseUrl: database.url, kafkaBrokers: broker.brokers });
  }, 180_000);
  afterAll(async () => {
    process.kill(broker.pid, 'SIGCONT');
    await platform.stop();
    await broker.stop();
    await database.drop();
  });

  it('answers 503 in api, projector and webhook-dispatcher, 200 in auth (no consumer), and 200 again after', async () => {
    const { auth, ...consumers } = platform.processes;
    process.kill(broker.pid, 'SIGSTOP');
    try {
      for (const url of Object.values(consumers)) {
        expect(await waitUntil(url, 503, undefined, 10_000)).toBeLessThan(10_000);
      }
      expect((await fetch(`${auth}/readyz`)).status).toBe(200);
    } finally {
      process.kill(broker.pid, 'SIGCONT');
    }
    for (const url of Object.values(consumers)) await waitUntil(url, 200, undefined, 60_000);
  }, 120_000);
});

/**
 * A start under load: readiness waits until the pool's connections are open and the token issuer's
 * keys are fetched, so that the first requests a load balancer sends once `/readyz` says 200 find
 * them (before, `/readyz` said ready at once and a burst right after a start answered 503 while the
 * keys were fetched and the connections opened).
 */
describe('readiness after a start (standalone)', () => {
  let database: TestDatabase;
  let platform: StandaloneProcess | undefined;
  let issuer: Server;
  let issuerOpen = false;
  let keysAsked = 0;
  let dataDir: string;
  beforeAll(async () => {
    database = await createTestDatabase();
    dataDir = await mkdtemp(join(CACHE_DIR, 'warm-start-'));
    // The issuer's keys, answered 503 until the test opens it, as an auth service that is starting.
    issuer = createServer((request, response) => {
      keysAsked++;
      if (!issuerOpen || !platform) return void response.writeHead(503).end();
      fetch(`${platform.url}${request.url}`).then(
        async (upstream) =>
          response
            .writeHead(upstream.status, { 'content-type': 'application/json' })
            .end(await upstream.text()),
        () => response.writeHead(502).end(),
      );
    });
    await new Promise<void>((resolve) => issuer.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    await platform?.stop();
    await new Promise((resolve) => issuer.close(resolve));
    await database.drop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('is not ready until the token keys are fetched, and then answers a burst of tokens at once', async () => {
    const { port } = issuer.address() as AddressInfo;
    platform = await spawnStandalone({
      env: { DATABASE_URL: database.url, AUTH_URL: `http://127.0.0.1:${port}`, DATA_DIR: dataDir },
    });
    const started = platform;
    // It listens, and asks for the keys again and again, but is not ready without them.
    const until = async (what: string, condition: () => Promise<boolean>, timeoutMs: number) => {
      const deadline = Date.now() + timeoutMs;
      while (!(await condition())) {
        if (started.child.exitCode !== null || Date.now() > deadline)
          throw new Error(`${what} did not happen:\n${started.output().stdout}\n${started.output().stderr}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    };
    const answers = (path: string) =>
      fetch(`${started.url}${path}`).then(
        (response) => response.status,
        () => undefined,
      );
    await until('listening', async () => (await answers('/livez')) === 200, 90_000);
    await until('asking for the keys', () => Promise.resolve(keysAsked >= 3), 10_000);
    expect(await answers('/readyz')).toBe(503);

    issuerOpen = true;
    await waitUntil(started.url, 200, started, 30_000);
    expect(started.output().stdout).toMatch(
      /"msg":"warmed up in \d+ ms: 10 database connections open, \d+ token keys fetched"/,
    );
    const clientId = /^ {2}client_id: +(\S+)$/m.exec(started.output().stderr)?.[1];
    const clientSecret = /^ {2}client_secret: +(\S+)$/m.exec(started.output().stderr)?.[1];
    const tokenResponse = await fetch(`${started.url}/oauth/token`, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`${clientId}:${clientSecret}`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: 'grant_type=client_credentials',
    });
    expect(tokenResponse.status).toBe(200);
    const { access_token: token } = (await tokenResponse.json()) as { access_token: string };
    // The first authenticated requests, all at once: none waits for keys or a connection.
    const asked = keysAsked;
    const statuses = await Promise.all(
      Array.from({ length: 40 }, () =>
        fetch(`${started.url}/v2/people`, { headers: { authorization: `Bearer ${token}` } }).then(
          (response) => response.status,
        ),
      ),
    );
    expect(statuses).toEqual(statuses.map(() => 200));
    expect(keysAsked).toBe(asked);
  }, 180_000);
});
