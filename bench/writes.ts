// `npm run bench:writes` (issue 12): writes per second with read-your-writes (a person; a fulfillment
// order, whose inventory commitment the response waits for), next to a lean server's write (issue 25:
// `bench/lean/append.ts`, node:http + pg appending the same event with the same library and answering
// the record, driven by the same load generator) and the same append through `pg` from the load
// generator with no wait, in one run; and the latency the derived wait adds (the same fulfillment order with
// `Prefer: respond-async`). CPU time per write of the platform, its Postgres backends and this process.
// Then the same person write and raw append with BENCH_STORE_EVENTS (100,000; `--large` adds
// 5,000,000) events of a type no consumer reads already in the store (issue 17: does a write's cost
// grow with the store?). Each row starts once the platform is idle, so that none pays for the backlog
// of the row before it (the lean server's appends, which its consumers handle after it), and every
// write is warmed up first, the person write last and by a number of writes (`BENCH_WARMUP_WRITES`),
// so that no row pays for V8 still optimizing its path.

import { randomUUID } from 'node:crypto';
import { Pool as HttpPool } from 'undici';
import { EventStore } from '@ofp/event-store';
import { createPool, type Pool } from '@ofp/runtime';
import {
  createIntegrator,
  startPlatform,
  startScratchDatabase,
  testLogger,
  UNLIMITED_RATE,
} from '@ofp/testing';
import {
  cpuProfileOptions,
  loadGenerator,
  maxAndHalfRate,
  postgresBackends,
  processes,
  profileTable,
  warmUp,
  warmUpFor,
  type RateProfile,
  progressBar,
  untilIdle,
} from './measure.js';
import { startLean } from './lean.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
/**
 * Person writes before the first row (at most 60 s of them): the platform's write path reaches its
 * steady state after about this many, not after a time (see `warmUpFor`).
 */
const WARMUP_WRITES = Number(process.env.BENCH_WARMUP_WRITES ?? 6_000);
/** Writers at once: an ERP's import threads. */
const CONCURRENCY = 16;
const SKUS = 50;
/** Connections of the platform's pool and the lean server's (DATABASE_POOL_SIZE's default). */
const POOL_SIZE = 10;
const STORE_SIZES = [
  ...(process.env.BENCH_STORE_EVENTS ?? '100000').split(',').map(Number),
  ...(process.argv.includes('--large') ? [5_000_000] : []),
].sort((a, b) => a - b);
/** Events inserted per statement while seeding. */
const SEED_CHUNK = 50_000;

const logger = testLogger('bench');
const database = await startScratchDatabase(logger, 'bench_writes');
const platform = await startPlatform({
  databaseUrl: database.url,
  env: { ...UNLIMITED_RATE, DATABASE_POOL_SIZE: String(POOL_SIZE) },
  nodeOptions: cpuProfileOptions(),
});
const postgres = await postgresBackends(database.url);
const pool = createPool({
  connectionString: database.url,
  applicationName: 'bench-writes',
  max: CONCURRENCY,
});
let lean: Awaited<ReturnType<typeof startLean>> | undefined;
try {
  const integrator = await createIntegrator(platform, { name: 'Bench' });
  lean = await startLean('append', {
    DATABASE_URL: database.url,
    POOL_SIZE: String(POOL_SIZE),
    ORG_ID: String(integrator.organizationId),
  });
  const http = new HttpPool(platform.apiUrl, { connections: CONCURRENCY });
  const leanHttp = new HttpPool(lean.url!, { connections: CONCURRENCY });
  const post =
    (path: string, body: unknown, headers: Record<string, string> = {}, to = http) =>
    async () => {
      const response = await to.request({
        method: 'POST',
        path,
        headers: {
          authorization: `Bearer ${integrator.accessToken}`,
          'content-type': 'application/json',
          ...headers,
        },
        body: JSON.stringify(body),
      });
      const text = await response.body.text();
      if (response.statusCode !== 201) throw new Error(`${path}: ${response.statusCode} ${text}`);
    };
  const person = (i: number) => post('/v2/people', { last_name: `Bench ${i}` })();
  const leanPerson = (i: number) => post('/v2/people', { last_name: `Bench ${i}` }, {}, leanHttp)();
  const fulfillment =
    (headers: Record<string, string> = {}) =>
    (i: number) =>
      post(
        '/v2/fulfillment_orders',
        { warehouse: 'MAIN', lines: [{ sku: `SKU-${i % SKUS}`, quantity: 1 }] },
        headers,
      )();
  // The raw baseline: a person's event appended with the event store library, no HTTP, no wait.
  const store = new EventStore(pool, { outbox: false });
  const append = async (): Promise<void> => {
    const id = randomUUID();
    await store.append({
      streamId: `bench-${id}`,
      streamType: 'bench',
      expectedVersion: 0,
      orgId: integrator.organizationId,
      events: [{ eventId: id, type: 'bench.created', data: { record: { last_name: 'Bench' } } }],
    });
  };

  // Every row accounts every process: the platform's readers also wake up for the lean server's and the
  // raw appends, and the lean server idles while the platform works.
  const platformCpu = processes('platform', Object.values(platform.pids));
  const participants = [platformCpu, lean.cpu, postgres, loadGenerator('loadgen')];
  await warmUp(WARMUP_SECONDS, CONCURRENCY, fulfillment());
  await warmUp(WARMUP_SECONDS, CONCURRENCY, leanPerson);
  // The raw append too: its row was the only one measured cold (this process's append path).
  await warmUp(WARMUP_SECONDS, CONCURRENCY, append);
  // Last, right before its row: the other writes share functions with it (the decider, the append, the
  // projector's upsert), whose optimized code their shapes made V8 throw away and compile again.
  const personWarmUp = await warmUpFor(WARMUP_WRITES, 60, CONCURRENCY, person);
  // Each row starts with the platform idle: the lean server's appends (its warm-up's and its row's) leave
  // the projector and the webhook intake a backlog, which the next row would otherwise pay for (the raw
  // append's row, measured after the lean server's, was charged 200-300 µs of platform CPU per append
  // for it, against 60-80 µs when measured after the person writes).
  const waits: { seconds: number; idle: boolean }[] = [];
  const row = async (operation: (i: number) => Promise<void>): Promise<RateProfile> => {
    waits.push(await untilIdle(platformCpu));
    return maxAndHalfRate(participants, SECONDS, CONCURRENCY, operation);
  };
  const rows: [string, RateProfile][] = [
    ['POST /v2/people', await row(person)],
    ['POST fulfillment_orders', await row(fulfillment())],
    ['  same, respond-async', await row(fulfillment({ prefer: 'respond-async' }))],
    ['lean server append', await row(leanPerson)],
    ['raw append (pg)', await row(append)],
  ];
  const table = profileTable(
    participants.map(({ name }) => name),
    'write',
  );
  console.log(
    `\nWrites with read-your-writes, concurrency ${CONCURRENCY} (standalone), after ${personWarmUp.operations.toLocaleString('en')} person writes of warm-up (${personWarmUp.seconds.toFixed(1)} s)`,
  );
  console.log(table.header);
  for (const [name, profile] of rows) console.log(table.row(name, profile));
  const [, people] = rows[0]!;
  const [, derived] = rows[1]!;
  const [, async] = rows[2]!;
  const [, leanAppend] = rows[3]!;
  const [, raw] = rows[4]!;
  const platformUs = (profile: RateProfile): number =>
    (profile.maxCpu.get('platform')! * 1e6) / profile.max.operations;
  const leanUs = (leanAppend.maxCpu.get('lean')! * 1e6) / leanAppend.max.operations;
  console.log(
    `\nPOST /v2/people: ${((100 * people.max.perSecond) / raw.max.perSecond).toFixed(0)}% of the raw append's rate, ${((100 * people.max.perSecond) / leanAppend.max.perSecond).toFixed(0)}% of the lean server's; fulfillment order: ${((100 * derived.max.perSecond) / raw.max.perSecond).toFixed(0)}% of the raw append's`,
  );
  console.log(
    `platform CPU per write against the lean server's ${leanUs.toFixed(0)} µs: POST /v2/people ${(platformUs(people) / leanUs).toFixed(2)}x, fulfillment order ${(platformUs(derived) / leanUs).toFixed(2)}x`,
  );
  console.log(
    `the derived wait (the inventory manager, then the projector), each at half its maximum rate: waited for p50 ${derived.half.p50Ms.toFixed(2)} / p99 ${derived.half.p99Ms.toFixed(2)} ms, respond-async p50 ${async.half.p50Ms.toFixed(2)} / p99 ${async.half.p99Ms.toFixed(2)} ms`,
  );

  const growth: [string, RateProfile][] = [];
  for (const size of STORE_SIZES) {
    const stored = await seedEvents(pool, integrator.organizationId, size);
    await warmUp(WARMUP_SECONDS, CONCURRENCY, person);
    const label = `${stored.toLocaleString('en')} events`;
    growth.push([`POST /v2/people, ${label}`, await row(person)]);
    growth.push([`raw append, ${label}`, await row(append)]);
  }
  console.log(`\nThe same writes with events already in the store`);
  console.log(table.header);
  for (const [name, profile] of growth) console.log(table.row(name, profile));
  console.log(
    `\nthe platform went idle (below 5% of a core for 0.5 s) before each row after: ${waits
      .map(({ seconds, idle }) => `${seconds.toFixed(1)} s${idle ? '' : ' (not idle: measured anyway)'}`)
      .join(', ')}`,
  );
  await http.close();
  await leanHttp.close();
} finally {
  await lean?.stop();
  await pool.end();
  await postgres.close?.();
  await platform.stop();
  await database.stop();
}

/**
 * Fills the event store up to `size` events with events of a stream type no consumer reads (so that
 * every consumer has to read past them), in chunks, with a progress bar; then checkpoints, so that
 * the measurements do not pay for the seeding's writes. Seed streams are named by the store's count,
 * so a later, larger size adds new ones. @returns the events in the store.
 */
async function seedEvents(db: Pool, orgId: number, size: number): Promise<number> {
  const { rows } = await db.query<{ n: string }>('SELECT count(*) AS n FROM es.events');
  const from = Number(rows[0]!.n);
  if (size <= from) return from;
  const bar = progressBar('seeding [{bar}] {percentage}% | {value}/{total} events | {duration}s');
  bar.start(size, from);
  for (let done = from; done < size; done += SEED_CHUNK) {
    const count = Math.min(SEED_CHUNK, size - done);
    await db.query(
      `INSERT INTO es.events (event_id, stream_id, stream_type, version, type, org_id, data)
       SELECT gen_random_uuid(), 'seed-' || g, 'bench-seed', 1, 'bench.seeded', $1, '{}'::jsonb
         FROM generate_series($2::bigint, $3::bigint) g`,
      [orgId, done + 1, done + count],
    );
    bar.update(done + count);
  }
  bar.stop();
  await db.query('CHECKPOINT');
  return size;
}
