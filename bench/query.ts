// `npm run bench:query`: searches of the api against the same SQL sent straight through pg, in one run.
// 200,000 people with two phone numbers each; six searches at concurrency 32 (issue 3).
import pg from 'pg';
import { SingleBar, Presets } from 'cli-progress';
import { Pool as HttpPool } from 'undici';
import { preparedQuery } from '@ofp/api';
import { compileSearch, parseQuery, people, renderDocuments } from '@ofp/models';
import { createIntegrator, startPlatform, startScratchDatabase, testLogger } from '@ofp/testing';
import { formatRow, measure, warmUp } from './measure.js';

const PEOPLE = Number(process.env.BENCH_PEOPLE ?? 200_000);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 5_000);
const CONCURRENCY = 32;
/** Seconds of each search on each side before measuring it (see `warmUp`). */
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 5);
const CHUNK = 10_000;
const LAST_NAMES = 1_000;

const logger = testLogger('bench');
const database = await startScratchDatabase(logger, 'bench_query');
const databaseUrl = database.url;

const platform = await startPlatform({
  databaseUrl,
  // The platform's own pool (DATABASE_POOL_SIZE's default): it serves 32 requests in flight with fewer
  // connections than that, as it would in production.
  env: {
    RATE_LIMIT_CAPACITY: '100000000',
    RATE_LIMIT_REFILL_PER_SECOND: '100000000',
  },
});
const raw = new pg.Pool({ connectionString: databaseUrl, max: CONCURRENCY });
try {
  const integrator = await createIntegrator(platform, { name: 'Bench' });
  const orgId = integrator.organizationId;
  // The organization's phone number types exist once it made a request.
  const types = await integrator.request<{ id: number; name: string }[]>('GET', '/v2/phone_number_types');
  const work = types.body.results.find((t) => t.name === 'Work')!.id;
  const home = types.body.results.find((t) => t.name === 'Home')!.id;

  // Seeding writes the read model's tables directly (the same layout the projector writes, documents
  // included), since 200,000 commands through the api would measure the command side, not searches.
  const bar = new SingleBar(
    { format: 'seeding [{bar}] {percentage}% | {value}/{total} people | {duration}s' },
    Presets.shades_classic,
  );
  bar.start(PEOPLE, 0);
  for (let from = 1; from <= PEOPLE; from += CHUNK) {
    const to = Math.min(PEOPLE, from + CHUNK - 1);
    await raw.query(
      `INSERT INTO read.people (id, org_id, created_at, updated_at, version, first_name, last_name, email, company, external_id)
       SELECT 1000000 + g, $1, now(), now(), 1, 'First' || (g % 50), 'Last' || lpad((g % ${LAST_NAMES})::text, 4, '0'),
              'p' || g || '@example.com', CASE WHEN g % 7 = 0 THEN NULL ELSE 'Company' || (g % 100) END, 'ext-' || g
         FROM generate_series($2::int, $3::int) g`,
      [orgId, from, to],
    );
    await raw.query(
      `INSERT INTO read.people__phone_numbers (org_id, record_id, ordinal, number, phone_number_type_id)
       SELECT $1, 1000000 + g, o, '55' || lpad((g * 2 + o)::text, 8, '0'), CASE WHEN o = 0 THEN $4::bigint ELSE $5::bigint END
         FROM generate_series($2::int, $3::int) g, generate_series(0, 1) o`,
      [orgId, from, to, work, home],
    );
    await renderDocuments(
      raw,
      people,
      orgId,
      Array.from({ length: to - from + 1 }, (_, k) => 1_000_000 + from + k),
    );
    bar.update(to);
  }
  bar.stop();
  await raw.query(
    `INSERT INTO read.record_counts (model, org_id, count) VALUES ('people', $1, $2)
     ON CONFLICT (model, org_id) DO UPDATE SET count = read.record_counts.count + EXCLUDED.count`,
    [orgId, PEOPLE],
  );
  await raw.query('VACUUM ANALYZE read.people');
  await raw.query('VACUUM ANALYZE read.people__phone_numbers');
  // Seeding's writes are flushed now rather than by a checkpoint in the middle of a measurement.
  await raw.query('CHECKPOINT');

  const lastName = (i: number): string => `Last${String((i * 37) % LAST_NAMES).padStart(4, '0')}`;
  const phone = (i: number): string => `55${String(((i * 7919) % PEOPLE) * 2 + 2).padStart(8, '0')}`;
  const searches: [string, (i: number) => unknown][] = [
    ['plain filter', (i) => ({ filters: [{ operand: 'last_name', operator: '=', value: lastName(i) }] })],
    [
      'two-column order',
      () => ({ order: [{ column: 'last_name' }, { column: 'first_name', direction: 'desc' }] }),
    ],
    [
      'dotted filter',
      (i) => ({ filters: [{ operand: 'phone_numbers.number', operator: '=', value: phone(i) }] }),
    ],
    [
      'chained dotted filter',
      (i) => ({
        filters: [
          { operand: 'phone_numbers.phone_number_type.name', operator: '=', value: 'Work' },
          { operand: 'phone_numbers.number', operator: '=', value: phone(i) },
        ],
      }),
    ],
    [
      'in list (20 values)',
      (i) => ({
        filters: [
          {
            operand: 'last_name',
            operator: 'in',
            value: Array.from({ length: 20 }, (_, k) => lastName(i + k)),
          },
        ],
      }),
    ],
    ['offset 10,000', () => ({ limit: 50, offset: 10_000 })],
  ];

  const http = new HttpPool(platform.apiUrl, { connections: CONCURRENCY, pipelining: 1 });
  const token = integrator.accessToken;
  console.log(
    `\n${PEOPLE} people x 2 phone numbers; ${REQUESTS} requests per search at concurrency ${CONCURRENCY}\n`,
  );
  console.log(`${'search'.padEnd(26)} ${'api'.padEnd(44)} | ${'raw SQL through pg'.padEnd(48)} | api/raw`);
  const failures: string[] = [];
  for (const [name, q] of searches) {
    const api = async (i: number): Promise<void> => {
      const response = await http.request({
        method: 'GET',
        path: `/v2/people?q=${encodeURIComponent(JSON.stringify(q(i)))}`,
        headers: { authorization: `Bearer ${token}` },
      });
      const body = await response.body.text();
      if (response.statusCode !== 200) throw new Error(`${name}: ${response.statusCode} ${body}`);
    };
    // The same statement as the api sends, prepared the same way (one plan per statement shape), its
    // page of JSON received as text as the api receives it.
    const sql = async (i: number): Promise<void> => {
      await raw.query(preparedQuery(compileSearch(people, orgId, parseQuery(people, JSON.stringify(q(i))))));
    };
    await warmUp(WARMUP_SECONDS, CONCURRENCY, api);
    await warmUp(WARMUP_SECONDS, CONCURRENCY, sql);
    const apiResult = await measure(REQUESTS, CONCURRENCY, api);
    const rawResult = await measure(REQUESTS, CONCURRENCY, sql);
    console.log(formatRow(name, apiResult, rawResult));
    if (apiResult.perSecond < 0.7 * rawResult.perSecond)
      failures.push(`${name}: under 70% of raw throughput`);
    if (apiResult.p99Ms > 25) failures.push(`${name}: p99 ${apiResult.p99Ms.toFixed(1)} ms over 25 ms`);
  }
  await http.close();
  console.log(
    failures.length === 0
      ? '\nall searches within target (>= 70% of raw throughput, p99 < 25 ms)'
      : `\nmissed target:\n  ${failures.join('\n  ')}`,
  );
} finally {
  await raw.end();
  await platform.stop();
  await database.stop();
}
