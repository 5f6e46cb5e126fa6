import pg from 'pg';
import {
  CACHE_DIR,
  RUN_MODES,
  createTestDatabase,
  startKafkaBroker,
  startPlatform,
  testLogger,
  waitUntil,
  type RunningKafka,
  type RunningPlatform,
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
