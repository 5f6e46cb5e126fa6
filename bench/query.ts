// `npm run bench:query [-- --large]`: searches of the api against the same SQL sent straight through pg,
// in one run, at growing sizes of the read model (20,000 and 200,000 people with two phone numbers each;
// 2,000,000 as well with --large). For each size and search: the maximum rate at concurrency 32 on both
// sides, the CPU time per request of each process involved, and the api's latency at half its maximum
// rate; then how each search's Postgres CPU and latency grow with the data (issue 17).
import pg from 'pg';
import { Pool as HttpPool } from 'undici';
import { preparedQuery } from '@ofp/api';
import { compileSearch, parseQuery, people, renderDocuments } from '@ofp/models';
import {
  createIntegrator,
  startPlatform,
  startScratchDatabase,
  testLogger,
  UNLIMITED_RATE,
} from '@ofp/testing';
import {
  cpuPerUnit,
  cpuProfileOptions,
  loadGenerator,
  measureAtRate,
  measureFor,
  postgresBackends,
  processes,
  warmUp,
  withCpu,
  type Measurement,
  progressBar,
} from './measure.js';

const SIZES = [
  ...(process.env.BENCH_PEOPLE ?? '20000,200000').split(',').map(Number),
  ...(process.argv.includes('--large') ? [2_000_000] : []),
].sort((a, b) => a - b);
/** Seconds each search runs at its maximum rate on each side, and then at half the api's maximum. */
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
/** Seconds of each search on each side before measuring it (see `warmUp`). */
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
const CONCURRENCY = 32;
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

const logger = testLogger('bench');
const database = await startScratchDatabase(logger, 'bench_query');
const databaseUrl = database.url;

const platform = await startPlatform({
  databaseUrl,
  // The platform's own pool (DATABASE_POOL_SIZE's default): it serves 32 requests in flight with fewer
  // connections than that, as it would in production.
  env: UNLIMITED_RATE,
  nodeOptions: cpuProfileOptions(),
});
const raw = new pg.Pool({ connectionString: databaseUrl, max: CONCURRENCY });
const postgres = await postgresBackends(databaseUrl);
const platformProcesses = processes('platform', Object.values(platform.pids));
const generator = loadGenerator();

interface SearchResult {
  readonly api: Measurement;
  readonly raw: Measurement;
  readonly halfRate: Measurement;
  /** µs of CPU per request at the maximum rate. */
  readonly platformUs: number | undefined;
  readonly postgresUs: number | undefined;
  readonly generatorUs: number | undefined;
  readonly rawPostgresUs: number | undefined;
  readonly rawGeneratorUs: number | undefined;
  /** µs of Postgres CPU per request at half the api's maximum rate. */
  readonly halfRatePostgresUs: number | undefined;
}

try {
  const integrator = await createIntegrator(platform, { name: 'Bench' });
  const orgId = integrator.organizationId;
  // The organization's phone number types exist once it made a request.
  const types = await integrator.request<{ id: number; name: string }[]>('GET', '/v2/phone_number_types');
  const work = types.body.results.find((t) => t.name === 'Work')!.id;
  const home = types.body.results.find((t) => t.name === 'Home')!.id;

  const searches: [string, (i: number, size: number) => unknown][] = [
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
  ];

  const http = new HttpPool(platform.apiUrl, { connections: CONCURRENCY, pipelining: 1 });
  const token = integrator.accessToken;
  const results = new Map<number, Map<string, SearchResult>>();
  let seeded = 0;
  for (const size of SIZES) {
    await seed(orgId, seeded, size, work, home);
    seeded = size;
    console.log(
      `\n${size.toLocaleString('en')} people x 2 phone numbers; each search ${SECONDS} s at concurrency ${CONCURRENCY} on each side, then ${SECONDS} s at half the api's maximum rate`,
    );
    console.log(
      `${''.padEnd(24)} ${'maximum rate'.padEnd(24)} | ${'CPU µs per request: api side'.padEnd(30)} | ${'raw side'.padEnd(15)} | at half the api's maximum rate`,
    );
    console.log(
      `${'search'.padEnd(24)} ${'api/s'.padStart(7)} ${'raw/s'.padStart(7)} ${'ratio'.padStart(7)} | ${'platform'.padStart(8)} ${'postgres'.padStart(8)} ${'loadgen'.padStart(8)}   | ${'postgres'.padStart(8)} ${'loadgen'.padStart(7)} | ${'rate'.padStart(6)} ${'p50'.padStart(6)} ${'p90'.padStart(6)} ${'p99'.padStart(6)} ms`,
    );
    const bySearch = new Map<string, SearchResult>();
    results.set(size, bySearch);
    for (const [name, q] of searches) {
      const api = async (i: number): Promise<void> => {
        const response = await http.request({
          method: 'GET',
          path: `/v2/people?q=${encodeURIComponent(JSON.stringify(q(i, size)))}`,
          headers: { authorization: `Bearer ${token}` },
        });
        const body = await response.body.text();
        if (response.statusCode !== 200) throw new Error(`${name}: ${response.statusCode} ${body}`);
      };
      // The same statement as the api sends, prepared the same way (one plan per statement shape), its
      // page of JSON received as text as the api receives it.
      const sql = async (i: number): Promise<void> => {
        await raw.query(
          preparedQuery(compileSearch(people, orgId, parseQuery(people, JSON.stringify(q(i, size))))),
        );
      };
      await warmUp(WARMUP_SECONDS, CONCURRENCY, api);
      await warmUp(WARMUP_SECONDS, CONCURRENCY, sql);
      const apiSide = [platformProcesses, postgres, generator];
      const maxApi = await withCpu(apiSide, () => measureFor(SECONDS, CONCURRENCY, api));
      const maxRaw = await withCpu([postgres, generator], () => measureFor(SECONDS, CONCURRENCY, sql));
      const half = await withCpu(apiSide, () => measureAtRate(maxApi.result.perSecond / 2, SECONDS, api));
      const result: SearchResult = {
        api: maxApi.result,
        raw: maxRaw.result,
        halfRate: half.result,
        platformUs: cpuPerUnit(maxApi.cpu, platformProcesses.name, maxApi.result.operations),
        postgresUs: cpuPerUnit(maxApi.cpu, postgres.name, maxApi.result.operations),
        generatorUs: cpuPerUnit(maxApi.cpu, generator.name, maxApi.result.operations),
        rawPostgresUs: cpuPerUnit(maxRaw.cpu, postgres.name, maxRaw.result.operations),
        rawGeneratorUs: cpuPerUnit(maxRaw.cpu, generator.name, maxRaw.result.operations),
        halfRatePostgresUs: cpuPerUnit(half.cpu, postgres.name, half.result.operations),
      };
      bySearch.set(name, result);
      console.log(formatSearch(name, result));
    }
    printGoals(bySearch);
  }
  await http.close();
  printGrowth(
    results,
    searches.map(([name]) => name),
  );
} finally {
  await postgres.close?.();
  await raw.end();
  await platform.stop();
  await database.stop();
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

function formatSearch(name: string, r: SearchResult): string {
  const ratio = `${((100 * r.api.perSecond) / r.raw.perSecond).toFixed(0)}%`;
  const ms = (value: number): string => value.toFixed(2).padStart(6);
  return `${name.padEnd(24)} ${r.api.perSecond.toFixed(0).padStart(7)} ${r.raw.perSecond.toFixed(0).padStart(7)} ${ratio.padStart(7)} | ${us(r.platformUs, 8)} ${us(r.postgresUs, 8)} ${us(r.generatorUs, 8)}   | ${us(r.rawPostgresUs, 8)} ${us(r.rawGeneratorUs, 7)} | ${r.halfRate.perSecond.toFixed(0).padStart(6)} ${ms(r.halfRate.p50Ms)} ${ms(r.halfRate.p90Ms)} ${ms(r.halfRate.p99Ms)}`;
}

/** Issue 17's goals for the request path: what the platform spends on a search, beside Postgres. */
function printGoals(bySearch: ReadonlyMap<string, SearchResult>): void {
  const missed: string[] = [];
  for (const [name, r] of bySearch) {
    const cheap = ['plain filter', 'dotted filter', 'chained dotted filter'].includes(name);
    if (cheap && r.platformUs !== undefined && r.platformUs > 80)
      missed.push(`${name}: platform CPU ${r.platformUs.toFixed(0)} µs per request (goal <= 80 µs)`);
    if (r.api.perSecond < 0.7 * r.raw.perSecond)
      missed.push(
        `${name}: ${((100 * r.api.perSecond) / r.raw.perSecond).toFixed(0)}% of raw throughput (goal >= 70%)`,
      );
    if (r.halfRate.p99Ms > 10)
      missed.push(`${name}: p99 ${r.halfRate.p99Ms.toFixed(1)} ms at half the maximum rate (goal <= 10 ms)`);
  }
  console.log(
    missed.length === 0 ? 'all searches within the goals' : `missed goals:\n  ${missed.join('\n  ')}`,
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
  console.log(`\nGrowth: Postgres CPU per request and p50 at half the api's maximum rate`);
  console.log(
    `${'search'.padEnd(24)} ${sizes.map((size) => `${size.toLocaleString('en')} people`.padStart(cell)).join('')}   growth (CPU, p50)`,
  );
  for (const name of names) {
    const row = sizes.map((size) => results.get(size)!.get(name)!);
    const cells = row.map((r) =>
      `${us(r.halfRatePostgresUs, 7)} µs ${r.halfRate.p50Ms.toFixed(2).padStart(6)} ms`.padStart(cell),
    );
    const first = row[0]!;
    const last = row[row.length - 1]!;
    const factor = (a: number | undefined, b: number | undefined): string =>
      a === undefined || b === undefined ? 'n/a' : `x${(b / a).toFixed(1)}`;
    console.log(
      `${name.padEnd(24)} ${cells.join('')}   ${factor(first.halfRatePostgresUs, last.halfRatePostgresUs)}, ${factor(first.halfRate.p50Ms, last.halfRate.p50Ms)}`,
    );
  }
}
