// `npm run bench:events`: pages of the events feed (GET /v2/events, docs/events-feed.md) against the
// same statement sent straight through pg, in one run: an organization's events read from random
// cursors deep in a store of other organizations' events too, 100 at a time; then a page of a rare
// type, which stops at the feed's scan bound. For each: the maximum rate at concurrency 16 on both
// sides, the CPU time per page of each process, and the api's latency at half its maximum rate.
import { Pool as HttpPool } from 'undici';
import { encodeCursor, FEED_LIMITS } from '@ofp/api';
import { EventStore, type GlobalPosition } from '@ofp/event-store';
import { createPool } from '@ofp/runtime';
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
  progressBar,
  warmUp,
} from './measure.js';

/** Events of the measured organization; as many again belong to others, interleaved with them. */
const EVENTS = Number(process.env.BENCH_EVENTS ?? 200_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const CONCURRENCY = 16;
const PAGE = 100;
const CHUNK = 10_000;
/** One event in this many of the organization's is of the rare type. */
const RARE = 1_000;

const logger = testLogger('bench');
const database = await startScratchDatabase(logger, 'bench_events');
const platform = await startPlatform({
  databaseUrl: database.url,
  env: UNLIMITED_RATE,
  nodeOptions: cpuProfileOptions(),
});
const raw = createPool({ connectionString: database.url, max: CONCURRENCY, applicationName: 'bench-events' });
const store = new EventStore(raw, { outbox: false });
const postgres = await postgresBackends(database.url);
const platformProcesses = processes('platform', Object.values(platform.pids));
const generator = loadGenerator();

try {
  const integrator = await createIntegrator(platform, { name: 'Bench' });
  const orgId = integrator.organizationId;
  const positions = await seed(orgId);
  const http = new HttpPool(platform.apiUrl, { connections: CONCURRENCY, pipelining: 1 });
  const token = integrator.accessToken;
  // Cursors spread over the organization's events, none within a page of the end.
  const cursor = (i: number): GlobalPosition => positions[(i * 7919) % (positions.length - PAGE)]!;
  const page = (query: string) => async (i: number) => {
    const response = await http.request({
      method: 'GET',
      path: `/v2/events?limit=${PAGE}${query}&starting_after=${encodeCursor(cursor(i))}`,
      headers: { authorization: `Bearer ${token}` },
    });
    const body = await response.body.text();
    if (response.statusCode !== 200) throw new Error(`${response.statusCode} ${body}`);
  };
  const participants = [platformProcesses, postgres, generator];
  const table = profileTable(
    participants.map(({ name }) => name),
    'page',
  );
  console.log(
    `\n${EVENTS.toLocaleString('en')} events of the organization among ${(2 * EVENTS).toLocaleString('en')}; pages of ${PAGE}, ${SECONDS} s at concurrency ${CONCURRENCY}, then ${SECONDS} s at half the maximum rate`,
  );
  console.log(table.header);
  const cases: [string, (i: number) => Promise<void>, (i: number) => Promise<unknown>][] = [
    ['feed page', page(''), (i) => store.readOrganization(orgId, cursor(i), { limit: PAGE + 1 })],
    [
      'feed page, rare type',
      page('&type=person.deleted'),
      (i) =>
        store.readOrganization(orgId, cursor(i), {
          limit: PAGE + 1,
          types: ['person.deleted'],
          scanLimit: FEED_LIMITS.scanLimit,
        }),
    ],
  ];
  for (const [name, api, sql] of cases) {
    await warmUp(WARMUP_SECONDS, CONCURRENCY, api);
    await warmUp(WARMUP_SECONDS, CONCURRENCY, async (i) => void (await sql(i)));
    const measured = await maxAndHalfRate(participants, SECONDS, CONCURRENCY, api);
    const baseline = await maxAndHalfRate([postgres, generator], SECONDS, CONCURRENCY, async (i) => {
      await sql(i);
    });
    console.log(table.row(name, measured));
    console.log(table.row(`  raw (same statement)`, baseline));
    console.log(`  ${((100 * measured.max.perSecond) / baseline.max.perSecond).toFixed(0)}% of raw`);
  }
  await http.close();
} finally {
  await postgres.close?.();
  await raw.end();
  await platform.stop();
  await database.stop();
}

/**
 * Appends `EVENTS` person events of the organization, each followed by one of another organization,
 * straight into the event store (a person's rendered record as data, as the api appends it), in
 * transactions of `CHUNK` events; returns the organization's positions in order. Their stream type is
 * one that no consumer of the platform reads (the projector would otherwise spend the run projecting
 * them): the feed reads every stream type alike.
 */
async function seed(orgId: number): Promise<GlobalPosition[]> {
  const bar = progressBar('seeding [{bar}] {percentage}% | {value}/{total} events | {duration}s');
  bar.start(EVENTS, 0);
  for (let first = 1; first <= EVENTS; first += CHUNK) {
    const last = Math.min(EVENTS, first + CHUNK - 1);
    await raw.query(
      `INSERT INTO es.events (event_id, stream_id, stream_type, version, type, org_id, data)
       SELECT gen_random_uuid(), 'bench-' || (100000000 + g * 2 + o), 'bench', 1,
              CASE WHEN o = 0 AND g % ${RARE} = 0 THEN 'person.deleted' ELSE 'person.created' END,
              CASE WHEN o = 0 THEN $1::bigint ELSE $1::bigint + 1 END,
              jsonb_build_object(
                'record', jsonb_build_object('id', 100000000 + g * 2 + o, 'first_name', 'Ada', 'last_name', 'Lovelace ' || g,
                  'email', 'ada' || g || '@example.com', 'company', 'Analytical Engines', 'phone_numbers', '[]'::jsonb,
                  'external_id', null, 'created_at', now(), 'updated_at', now(), 'version', 1),
                'previous', '{}'::jsonb, 'deleted', false)
         FROM generate_series($2::int, $3::int) g, generate_series(0, 1) o
        ORDER BY g, o`,
      [orgId, first, last],
    );
    bar.update(last);
  }
  bar.stop();
  await raw.query('VACUUM ANALYZE es.events');
  await raw.query('CHECKPOINT');
  const { rows } = await raw.query<{ transaction_id: string; position: number }>(
    `SELECT transaction_id::text AS transaction_id, position FROM es.events WHERE org_id = $1
      ORDER BY transaction_id, position`,
    [orgId],
  );
  return rows.map((row) => ({ transactionId: row.transaction_id, position: row.position }));
}
