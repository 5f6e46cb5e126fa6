// `npm run bench:query [-- --large]`: searches of the api against a lean server doing the same work (issue
// 25: `bench/lean/search.ts`, node:http + pg running the same compiled SQL and writing the same bytes),
// driven by the same load generator in the same run, and against the same SQL sent straight through pg
// from the load generator (a second line: its client's CPU is the load generator's). At growing sizes of
// the read model: 20,000 and 200,000 people with two phone numbers each, 2,000,000 as well with --large.
// For each size and search, in rounds that alternate the two sides (a single run's CPU per request moves
// up to twofold with the machine's other work, so one run cannot tell 1.15x from 2x): each side at its
// maximum rate at concurrency 32, and each at the same fixed rate (half the api's maximum); the median
// and spread over the rounds of each process's CPU time per request and of the platform's against the
// lean server's, the platform's idle CPU taken off; each server's heap allocated and promoted per request
// and its collector's pauses (`AllocationTrace`); the api's latency at half its maximum rate; then how
// each search's Postgres CPU and latency grow with the data. `BENCH_TARGET=api` measures the api process
// as it ships (with a Kafka broker and the other services' processes) instead of the standalone one.
import { execFileSync } from 'node:child_process';
import pg from 'pg';
import { Pool as HttpPool } from 'undici';
import { preparedQuery } from '@ofp/api';
import { compileSearch, parseQuery, people, renderDocuments } from '@ofp/models';
import {
  CACHE_DIR,
  createIntegrator,
  startKafkaBroker,
  startPlatform,
  startScratchDatabase,
  testLogger,
  UNLIMITED_RATE,
} from '@ofp/testing';
import { startLean } from './lean.js';
import {
  AllocationTrace,
  addCollections,
  cpuPerUnit,
  type Collections,
  cpuProfileOptions,
  loadGenerator,
  measureAtRate,
  measureFor,
  median,
  postgresBackends,
  processes,
  warmUp,
  withCpu,
  type CpuParticipant,
  type CpuUsed,
  type Measurement,
  progressBar,
} from './measure.js';

const SIZES = [
  ...(process.env.BENCH_PEOPLE ?? '20000,200000').split(',').map(Number),
  ...(process.argv.includes('--large') ? [2_000_000] : []),
].sort((a, b) => a - b);
/** Seconds of each measured run of a round (each side at its maximum rate, then at half the api's). */
const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
/** Rounds per search, each measuring the platform and the lean server in turn (the first side alternates). */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
/**
 * Seconds the platform and the lean server are measured idle before each search's rounds: the standalone
 * platform process also hosts the projector, the consumers' pollers and the watchdogs, whose CPU while no
 * request arrives is not the searches' and is taken off their CPU per request.
 */
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 3);
/** Seconds of each search on each side before measuring it (see `warmUp`). */
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
/**
 * The platform's shape: `all`, the standalone process (no Kafka), which also hosts the projector, the
 * dispatcher and the pollers; or `api`, the api process as it ships (`TARGET=api`), beside the other
 * services' processes against a Kafka broker started for the run, the api's CPU alone measured.
 */
const TARGET = process.env.BENCH_TARGET ?? 'all';
/** Only the searches whose names contain this (`BENCH_SEARCH=dotted`), for a profile of one. */
const ONLY = process.env.BENCH_SEARCH;
const CONCURRENCY = 32;
/**
 * Connections of the platform's pool and the lean server's: the platform's default (DATABASE_POOL_SIZE),
 * which serves 32 requests in flight with fewer connections, as it would in production.
 */
const POOL_SIZE = 10;
/** Issue 25: the platform's CPU per search at most this many times the lean server's. */
const LEAN_RATIO_GOAL = 1.15;
/** Issue 25: a search's Postgres CPU per request grows at most this much from the smallest size to the largest. */
const GROWTH_GOAL = 1.5;
const CHUNK = 10_000;
/**
 * People per last name, at every size: a filter matches as many records at 2,000,000 people as at
 * 20,000, so that what grows with the size is the cost of finding them, not their number.
 */
const PEOPLE_PER_LAST_NAME = 200;
/** Each block of this many people shares out its own last names, spread over the block. */
const NAME_BLOCK = 20_000;

/**
 * The SQL for person `g`'s last name number: people `g` of one block get the block's names, 200 each,
 * in an order scrambled by a multiplier prime to the block size (so that one name's people are not
 * neighbours in the table).
 */
function lastNameIndex(g: string): string {
  return `(((${g} - 1) / ${NAME_BLOCK}) * ${NAME_BLOCK / PEOPLE_PER_LAST_NAME} + (((${g} - 1) % ${NAME_BLOCK}) * 7919 % ${NAME_BLOCK}) / ${PEOPLE_PER_LAST_NAME})`;
}

if (SIZES.some((size) => !Number.isInteger(size) || size < 20_000))
  throw new Error('BENCH_PEOPLE: comma-separated sizes of at least 20000 (the offset search skips 10,000)');
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error('BENCH_ROUNDS: a whole number of at least 1');
if (TARGET !== 'all' && TARGET !== 'api') throw new Error('BENCH_TARGET: all (the default) or api');

const logger = testLogger('bench');
const database = await startScratchDatabase(logger, 'bench_query');
const databaseUrl = database.url;
const kafka = TARGET === 'api' ? await startKafkaBroker({ cacheDir: CACHE_DIR, logger }) : undefined;
/** Each process's heap allocations, from its collections' lines (the platform's output, the lean server's). */
const allocations = new AllocationTrace();

const platform = await startPlatform({
  databaseUrl,
  ...(kafka === undefined ? {} : { kafkaBrokers: kafka.brokers }),
  env: { ...UNLIMITED_RATE, DATABASE_POOL_SIZE: String(POOL_SIZE) },
  nodeOptions: [...cpuProfileOptions(), ...AllocationTrace.options],
  output: allocations.sink(),
});
const raw = new pg.Pool({ connectionString: databaseUrl, max: CONCURRENCY });
const postgres = await postgresBackends(databaseUrl);
/** The process that serves the searches: the standalone one, or the api's. */
const platformPids = TARGET === 'api' ? [platform.pids.api!] : Object.values(platform.pids);
const platformProcesses = processes('platform', platformPids);
/** With `BENCH_TARGET=api`, the auth service's, the projector's and the dispatcher's processes. */
const otherProcesses = processes(
  'other processes',
  Object.entries(platform.pids)
    .filter(([name]) => name !== 'api')
    .map(([, pid]) => pid),
);
const generator = loadGenerator();

/** One side's run: the rate, the CPU time of each process involved, and its server's garbage collections. */
interface Side {
  readonly run: Measurement;
  readonly cpu: CpuUsed;
  readonly collections: Collections;
}

/** One round: each side at its maximum rate, and each at half the api's maximum of the first round. */
interface Round {
  readonly apiMax: Side;
  readonly leanMax: Side;
  readonly apiHalf: Side;
  readonly leanHalf: Side;
}

interface SearchResult {
  readonly rounds: readonly Round[];
  /** The same SQL through pg from the load generator. */
  readonly raw: Side;
  /** CPU seconds per second of the platform and of the lean server with no request arriving. */
  readonly idle: { readonly platform: number; readonly lean: number };
}

/** µs of `participant`'s CPU per request of a side. */
function usOf(side: Side, participant: CpuParticipant): number | undefined {
  return cpuPerUnit(side.cpu, participant.name, side.run.operations);
}

/**
 * µs of CPU per request of the platform (or the lean server) on a side, less what the process spends
 * idle (`idlePerSecond`) over the side's seconds: the standalone platform's projector, pollers and
 * watchdogs run whether or not searches arrive.
 */
function netUs(side: Side, participant: CpuParticipant, idlePerSecond: number): number | undefined {
  const seconds = side.cpu.get(participant.name);
  if (seconds === undefined) return undefined;
  return (Math.max(0, seconds - idlePerSecond * side.run.seconds) * 1e6) / side.run.operations;
}

const searches: [string, (i: number, size: number) => unknown][] = (
  [
    [
      'plain filter',
      (i, size) => ({ filters: [{ operand: 'last_name', operator: '=', value: lastName(i, size) }] }),
    ],
    [
      'two-column order',
      () => ({ order: [{ column: 'last_name' }, { column: 'first_name', direction: 'desc' }] }),
    ],
    [
      'dotted filter',
      (i, size) => ({ filters: [{ operand: 'phone_numbers.number', operator: '=', value: phone(i, size) }] }),
    ],
    [
      'chained dotted filter',
      (i, size) => ({
        filters: [
          { operand: 'phone_numbers.phone_number_type.name', operator: '=', value: 'Work' },
          { operand: 'phone_numbers.number', operator: '=', value: phone(i, size) },
        ],
      }),
    ],
    [
      'in list (20 values)',
      (i, size) => ({
        filters: [
          {
            operand: 'last_name',
            operator: 'in',
            value: Array.from({ length: 20 }, (_, k) => lastName(i + k, size)),
          },
        ],
      }),
    ],
    ['offset 10,000', () => ({ limit: 50, offset: 10_000 })],
  ] satisfies [string, (i: number, size: number) => unknown][]
).filter(([name]) => ONLY === undefined || name.includes(ONLY));
/** Searches whose cost grows with the data by nature (README "What grows with the data"). */
const GROWS_BY_NATURE = ['offset 10,000'];

let lean: Awaited<ReturnType<typeof startLean>> | undefined;
try {
  console.log(`load before: ${uptime()}`);
  const integrator = await createIntegrator(platform, { name: 'Bench' });
  const orgId = integrator.organizationId;
  // The organization's phone number types exist once it made a request.
  const types = await integrator.request<{ id: number; name: string }[]>('GET', '/v2/phone_number_types');
  const work = types.body.results.find((t) => t.name === 'Work')!.id;
  const home = types.body.results.find((t) => t.name === 'Home')!.id;
  lean = await startLean(
    'search',
    { DATABASE_URL: databaseUrl, POOL_SIZE: String(POOL_SIZE), ORG_ID: String(orgId) },
    allocations,
  );
  const leanCpu = lean.cpu;
  const leanPids = [lean.pid];

  const apiHttp = new HttpPool(platform.apiUrl, { connections: CONCURRENCY, pipelining: 1 });
  const leanHttp = new HttpPool(lean.url!, { connections: CONCURRENCY, pipelining: 1 });
  const token = integrator.accessToken;
  const results = new Map<number, Map<string, SearchResult>>();
  let seeded = 0;
  for (const size of SIZES) {
    await seed(orgId, seeded, size, work, home);
    seeded = size;
    console.log(
      `\n${size.toLocaleString('en')} people x 2 phone numbers; each search: ${ROUNDS} rounds, each of ${SECONDS} s at concurrency ${CONCURRENCY} on each side (the first side alternating), then ${SECONDS} s of each at half the api's maximum rate. CPU µs per request as median [lowest-highest] over the rounds; the platform's and the lean server's CPU while idle (measured ${IDLE_SECONDS} s before each search) taken off`,
    );
    const bySearch = new Map<string, SearchResult>();
    results.set(size, bySearch);
    for (const [name, q] of searches) {
      const path = (i: number): string => `/v2/people?q=${encodeURIComponent(JSON.stringify(q(i, size)))}`;
      /** A search through `http`, its body as text. */
      const get = async (http: HttpPool, i: number): Promise<string> => {
        const response = await http.request({
          method: 'GET',
          path: path(i),
          headers: { authorization: `Bearer ${token}` },
        });
        const body = await response.body.text();
        if (response.statusCode !== 200) throw new Error(`${name}: ${response.statusCode} ${body}`);
        return body;
      };
      const api = async (i: number): Promise<void> => void (await get(apiHttp, i));
      const leanSearch = async (i: number): Promise<void> => void (await get(leanHttp, i));
      // The same statement as the api sends, prepared the same way (one plan per statement shape), its
      // page of JSON received as text as the api receives it.
      const sql = async (i: number): Promise<void> => {
        await raw.query(
          preparedQuery(compileSearch(people, orgId, parseQuery(people, JSON.stringify(q(i, size))))),
        );
      };
      // The baseline does the same work: the same bytes for the same search.
      for (const i of [0, 1, 2]) {
        if ((await get(apiHttp, i)) !== (await get(leanHttp, i)))
          throw new Error(`${name}: the lean server's body differs from the api's`);
      }
      await warmUp(WARMUP_SECONDS, CONCURRENCY, api);
      await warmUp(WARMUP_SECONDS, CONCURRENCY, leanSearch);
      await warmUp(WARMUP_SECONDS, CONCURRENCY, sql);
      /** A side's run, with the collections of `server` (the platform's processes or the lean server). */
      const side = async (
        participants: readonly CpuParticipant[],
        server: readonly number[],
        work: () => Promise<Measurement>,
      ): Promise<Side> => {
        const before = allocations.of(server);
        const { result, cpu } = await withCpu(participants, work);
        const after = allocations.of(server);
        return {
          run: result,
          cpu,
          collections: addCollections(after, before, -1),
        };
      };
      const apiParticipants = [
        platformProcesses,
        postgres,
        generator,
        ...(TARGET === 'api' ? [otherProcesses] : []),
      ];
      const idle = await withCpu([platformProcesses, leanCpu], () => sleep(IDLE_SECONDS * 1000));
      const idlePerSecond = (participant: CpuParticipant): number =>
        (idle.cpu.get(participant.name) ?? 0) / IDLE_SECONDS;
      const apiMax = (): Promise<Side> =>
        side(apiParticipants, platformPids, () => measureFor(SECONDS, CONCURRENCY, api));
      const leanMax = (): Promise<Side> =>
        side([leanCpu, postgres, generator], leanPids, () => measureFor(SECONDS, CONCURRENCY, leanSearch));
      const rounds: Round[] = [];
      let halfRate: number | undefined;
      for (let round = 0; round < ROUNDS; round++) {
        // The side measured first alternates, so that a drift of the machine's load within a round
        // weighs on both alike.
        const apiFirst = round % 2 === 0;
        const first = await (apiFirst ? apiMax() : leanMax());
        const second = await (apiFirst ? leanMax() : apiMax());
        const [apiSide, leanSide] = apiFirst ? [first, second] : [second, first];
        halfRate ??= apiSide.run.perSecond / 2;
        const rate = halfRate;
        const apiHalf = (): Promise<Side> =>
          side(apiParticipants, platformPids, () => measureAtRate(rate, SECONDS, api));
        const leanHalf = (): Promise<Side> =>
          side([leanCpu, postgres, generator], leanPids, () => measureAtRate(rate, SECONDS, leanSearch));
        const third = await (apiFirst ? apiHalf() : leanHalf());
        const fourth = await (apiFirst ? leanHalf() : apiHalf());
        rounds.push({
          apiMax: apiSide,
          leanMax: leanSide,
          apiHalf: apiFirst ? third : fourth,
          leanHalf: apiFirst ? fourth : third,
        });
      }
      const result: SearchResult = {
        rounds,
        raw: await side([postgres, generator], [], () => measureFor(SECONDS, CONCURRENCY, sql)),
        idle: { platform: idlePerSecond(platformProcesses), lean: idlePerSecond(leanCpu) },
      };
      bySearch.set(name, result);
      console.log(formatSearch(name, result));
    }
    printGoals(bySearch);
  }
  await apiHttp.close();
  await leanHttp.close();
  printGrowth(
    results,
    searches.map(([name]) => name),
  );
  console.log(`\nload after: ${uptime()}`);
} finally {
  await lean?.stop();
  await postgres.close?.();
  await raw.end();
  await platform.stop();
  await kafka?.stop();
  await database.stop();
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function uptime(): string {
  return execFileSync('uptime', { encoding: 'utf8' }).trim();
}

/** A last name that people have at this size. */
function lastName(i: number, size: number): string {
  return `Last${String((i * 37) % (size / PEOPLE_PER_LAST_NAME)).padStart(5, '0')}`;
}

/** The work phone number of a person of this size. */
function phone(i: number, size: number): string {
  return `55${String(((i * 7919) % size) * 2 + 2).padStart(8, '0')}`;
}

/**
 * Grows the read model from `from` to `to` people, writing its tables directly (the same layout the
 * projector writes, documents included), since millions of commands through the api would measure the
 * command side, not searches.
 */
async function seed(orgId: number, from: number, to: number, work: number, home: number): Promise<void> {
  const bar = progressBar('seeding [{bar}] {percentage}% | {value}/{total} people | {duration}s');
  bar.start(to, from);
  for (let first = from + 1; first <= to; first += CHUNK) {
    const last = Math.min(to, first + CHUNK - 1);
    await raw.query(
      `INSERT INTO read.people (id, org_id, created_at, updated_at, version, first_name, last_name, email, company, external_id)
       SELECT 1000000 + g, $1, now(), now(), 1, 'First' || (g % 50),
              'Last' || lpad(${lastNameIndex('g')}::text, 5, '0'),
              'p' || g || '@example.com', CASE WHEN g % 7 = 0 THEN NULL ELSE 'Company' || (g % 100) END, 'ext-' || g
         FROM generate_series($2::int, $3::int) g`,
      [orgId, first, last],
    );
    await raw.query(
      `INSERT INTO read.people__phone_numbers (org_id, record_id, ordinal, number, phone_number_type_id)
       SELECT $1, 1000000 + g, o, '55' || lpad((g * 2 + o)::text, 8, '0'), CASE WHEN o = 0 THEN $4::bigint ELSE $5::bigint END
         FROM generate_series($2::int, $3::int) g, generate_series(0, 1) o`,
      [orgId, first, last, work, home],
    );
    await renderDocuments(
      raw,
      people,
      orgId,
      Array.from({ length: last - first + 1 }, (_, k) => 1_000_000 + first + k),
    );
    bar.update(last);
  }
  bar.stop();
  await raw.query(
    `INSERT INTO read.record_counts (model, org_id, count) VALUES ('people', $1, $2)
     ON CONFLICT (model, org_id) DO UPDATE SET count = read.record_counts.count + EXCLUDED.count`,
    [orgId, to - from],
  );
  await raw.query('VACUUM ANALYZE read.people');
  await raw.query('VACUUM ANALYZE read.people__phone_numbers');
  // Seeding's writes are flushed now rather than by a checkpoint in the middle of a measurement.
  await raw.query('CHECKPOINT');
}

function us(value: number | undefined, width: number): string {
  return (value === undefined ? 'n/a' : value.toFixed(0)).padStart(width);
}

/** The median, or undefined when a round was not measured. */
function medianOf(values: readonly (number | undefined)[]): number | undefined {
  return values.some((value) => value === undefined) ? undefined : median(values as number[]);
}

/** Values of the rounds as `median [lowest-highest]`, n/a where one was not measured. */
function spread(values: readonly (number | undefined)[], digits = 0, suffix = ''): string {
  if (values.some((value) => value === undefined)) return 'n/a';
  const measured = values as readonly number[];
  const f = (value: number): string => `${value.toFixed(digits)}${suffix}`;
  return `${f(median(measured))} [${f(Math.min(...measured))}-${f(Math.max(...measured))}]`;
}

/** The platform's CPU per request against the lean server's, idle CPU taken off, in each round. */
function ratios(r: SearchResult, which: 'Max' | 'Half'): (number | undefined)[] {
  return r.rounds.map((round) => {
    const platformUs = netUs(round[`api${which}`], platformProcesses, r.idle.platform);
    const leanUs = netUs(round[`lean${which}`], lean!.cpu, r.idle.lean);
    return platformUs === undefined || leanUs === undefined ? undefined : platformUs / leanUs;
  });
}

/**
 * A search's lines: at the maximum rate and at the same fixed rate, the rates and each process's CPU
 * per request (the platform's and the lean server's net of idle, their ratio, Postgres's on each side,
 * the load generator's on the api side) over the rounds; the api's latency at half its maximum rate;
 * the idle CPU taken off; and the raw pg side.
 */
function formatSearch(name: string, r: SearchResult): string {
  const leanCpu = lean!.cpu;
  const of = (
    pick: (round: Round) => Side,
    participant: CpuParticipant,
    idle?: number,
  ): (number | undefined)[] =>
    r.rounds.map((round) =>
      idle === undefined ? usOf(pick(round), participant) : netUs(pick(round), participant, idle),
    );
  const lines = [`${name}`];
  for (const which of ['Max', 'Half'] as const) {
    const api = (round: Round): Side => round[`api${which}`];
    const leanSide = (round: Round): Side => round[`lean${which}`];
    const rates =
      which === 'Max'
        ? `max rate: api ${spread(r.rounds.map((round) => round.apiMax.run.perSecond))}/s, lean ${spread(r.rounds.map((round) => round.leanMax.run.perSecond))}/s`
        : `same rate: ${spread(r.rounds.map((round) => round.apiHalf.run.perSecond))}/s on each side`;
    const byRound = ratios(r, which);
    /** A figure of a side's collections per request, in KB (bytes) or µs (pause). */
    const perRequest = (pick: (round: Round) => Side, figure: keyof Collections): number[] =>
      r.rounds.map((round) => {
        const { collections, run } = pick(round);
        return (
          (figure === 'pauseMs' ? collections.pauseMs * 1e3 : collections[figure] / 1024) / run.operations
        );
      });
    const allocatedRatio = r.rounds.map((round) => {
      const leanBytes = leanSide(round).collections.allocated / leanSide(round).run.operations;
      return leanBytes === 0
        ? undefined
        : api(round).collections.allocated / api(round).run.operations / leanBytes;
    });
    lines.push(
      `  ${rates}`,
      `    CPU µs per request: platform ${spread(of(api, platformProcesses, r.idle.platform))}, lean ${spread(of(leanSide, leanCpu, r.idle.lean))}, ratio ${spread(byRound, 2, 'x')} (by round: ${byRound.map((ratio) => ratio?.toFixed(2) ?? 'n/a').join(' ')})`,
      `    heap KB allocated per request: platform ${spread(perRequest(api, 'allocated'), 1)}, lean ${spread(perRequest(leanSide, 'allocated'), 1)}, ratio ${spread(allocatedRatio, 2, 'x')}; promoted KB: platform ${spread(perRequest(api, 'promoted'), 1)}, lean ${spread(perRequest(leanSide, 'promoted'), 1)}; collector pause µs: platform ${spread(perRequest(api, 'pauseMs'))}, lean ${spread(perRequest(leanSide, 'pauseMs'))}`,
      `    postgres ${spread(of(api, postgres))} (api) ${spread(of(leanSide, postgres))} (lean), load generator ${spread(of(api, generator))} (api) ${spread(of(leanSide, generator))} (lean)${TARGET === 'api' ? `, other platform processes ${spread(of(api, otherProcesses))}` : ''}`,
    );
  }
  const half = r.rounds.map((round) => round.apiHalf.run);
  lines.push(
    `  api latency at half its maximum rate: p50 ${spread(
      half.map((m) => m.p50Ms),
      2,
    )} p90 ${spread(
      half.map((m) => m.p90Ms),
      2,
    )} p99 ${spread(
      half.map((m) => m.p99Ms),
      2,
    )} ms`,
    `  idle CPU taken off: platform ${(r.idle.platform * 1e3).toFixed(1)} ms per s, lean ${(r.idle.lean * 1e3).toFixed(1)} ms per s`,
    `  raw pg, in the loadgen: ${r.raw.run.perSecond.toFixed(0)}/s: postgres ${us(usOf(r.raw, postgres), 0)} µs, loadgen ${us(usOf(r.raw, generator), 0)} µs per query`,
  );
  return lines.join('\n');
}

/**
 * Issue 25's goal for the request path: the platform's CPU per search at most 1.15 times the lean
 * server's, by the median over the rounds at the maximum rate and at the same rate.
 */
function printGoals(bySearch: ReadonlyMap<string, SearchResult>): void {
  const missed: string[] = [];
  for (const [name, r] of bySearch) {
    for (const which of ['Max', 'Half'] as const) {
      const measured = ratios(r, which);
      if (measured.some((ratio) => ratio === undefined)) continue;
      const ratio = median(measured as number[]);
      if (ratio > LEAN_RATIO_GOAL)
        missed.push(
          `${name} (${which === 'Max' ? 'maximum rate' : 'same rate'}): platform CPU per request ${ratio.toFixed(2)}x the lean server's, median of ${r.rounds.length} rounds (goal <= ${LEAN_RATIO_GOAL}x)`,
        );
    }
  }
  console.log(
    missed.length === 0 ? 'all searches within the goal' : `missed goal:\n  ${missed.join('\n  ')}`,
  );
}

/**
 * Each search's Postgres CPU per request and p50 at half the api's maximum rate, per size, and how much
 * they grew from the smallest size to the largest: a search that scans, counts everything or walks an
 * offset grows with the data, one that an index serves does not.
 */
function printGrowth(
  results: ReadonlyMap<number, ReadonlyMap<string, SearchResult>>,
  names: readonly string[],
): void {
  if (results.size < 2) return;
  const sizes = [...results.keys()];
  const cell = 22;
  console.log(
    `\nGrowth: Postgres CPU per request and p50 at half the api's maximum rate (medians over the rounds)`,
  );
  console.log(
    `${'search'.padEnd(24)} ${sizes.map((size) => `${size.toLocaleString('en')} people`.padStart(cell)).join('')}   growth (CPU, p50)`,
  );
  const missed: string[] = [];
  for (const name of names) {
    const row = sizes.map((size) => results.get(size)!.get(name)!);
    const postgresUs = row.map((r) => medianOf(r.rounds.map((round) => usOf(round.apiHalf, postgres))));
    const p50 = row.map((r) => median(r.rounds.map((round) => round.apiHalf.run.p50Ms)));
    const cells = row.map((_, k) =>
      `${us(postgresUs[k], 7)} µs ${p50[k]!.toFixed(2).padStart(6)} ms`.padStart(cell),
    );
    const first = postgresUs[0];
    const last = postgresUs[postgresUs.length - 1];
    const growth = first === undefined || last === undefined ? undefined : last / first;
    const p50Growth = p50[p50.length - 1]! / p50[0]!;
    const byNature = GROWS_BY_NATURE.includes(name) ? ' (grows by nature)' : '';
    console.log(
      `${name.padEnd(24)} ${cells.join('')}   ${growth === undefined ? 'n/a' : `x${growth.toFixed(1)}`}, x${p50Growth.toFixed(1)}${byNature}`,
    );
    if (growth !== undefined && growth > GROWTH_GOAL && byNature === '')
      missed.push(`${name}: Postgres CPU per request x${growth.toFixed(1)} (goal <= x${GROWTH_GOAL})`);
  }
  console.log(
    missed.length === 0 ? 'no search grew past the goal' : `missed goal:\n  ${missed.join('\n  ')}`,
  );
}
