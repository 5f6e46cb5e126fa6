/**
 * What a per-client rate limit shared by every api replica would cost per request, measured: a token
 * bucket kept in one Postgres row per client and taken with one statement (an upsert that refills by
 * the time passed and takes a token, RETURNING what is left), against the in-process bucket the
 * replicas keep today (TokenBucketLimiter). Both at concurrency 32, over BENCH_CLIENTS clients, after a
 * warm-up; Postgres CPU per request from /proc (the server processes' utime + stime).
 *
 *   npm run bench:rate-limit
 */
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { TokenBucketLimiter } from '@ofp/auth-tokens';
import { startTestPostgres, testLogger } from '@ofp/testing';
import { measure, warmUp } from './measure.js';

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 40_000);
const CLIENTS = Number(process.env.BENCH_CLIENTS ?? 50);
const CONCURRENCY = 32;
const CAPACITY = 1_000_000;
const REFILL = 100;

/** CPU seconds (user + system) of every process whose command line starts with `postgres`. */
function postgresCpuSeconds(): number {
  const ticks = 100;
  let total = 0;
  for (const pid of readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('postgres')) continue;
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      total += (Number(fields[11]) + Number(fields[12])) / ticks;
    } catch {
      // Gone meanwhile.
    }
  }
  return total;
}

const TAKE = `
  INSERT INTO rate_limit_buckets AS b (client_id, tokens, at) VALUES ($1, $2 - 1, clock_timestamp())
  ON CONFLICT (client_id) DO UPDATE SET
    tokens = LEAST($2, b.tokens + EXTRACT(EPOCH FROM clock_timestamp() - b.at) * $3) - 1,
    at = clock_timestamp()
  RETURNING tokens`;

const postgres = await startTestPostgres(testLogger('bench-rate-limit'));
const pool = new pg.Pool({ connectionString: postgres.url, max: CONCURRENCY });
pool.on('error', () => {});
try {
  await pool.query('DROP TABLE IF EXISTS rate_limit_buckets');
  await pool.query(
    'CREATE UNLOGGED TABLE rate_limit_buckets (client_id text PRIMARY KEY, tokens double precision NOT NULL, at timestamptz NOT NULL)',
  );
  const shared = async (i: number) => {
    await pool.query(TAKE, [`client-${i % CLIENTS}`, CAPACITY, REFILL]);
  };
  const limiter = new TokenBucketLimiter({ capacity: CAPACITY, refillPerSecond: REFILL }, () => new Date());
  const local = (i: number) => {
    limiter.take(`client-${i % CLIENTS}`);
    return Promise.resolve();
  };
  await warmUp(5, CONCURRENCY, shared);
  const cpuBefore = postgresCpuSeconds();
  const processBefore = process.cpuUsage();
  const sharedRun = await measure(REQUESTS, CONCURRENCY, shared);
  const processCpu = process.cpuUsage(processBefore);
  const postgresCpu = postgresCpuSeconds() - cpuBefore;
  const localRun = await measure(REQUESTS, CONCURRENCY, local);
  const us = (seconds: number) => ((seconds / REQUESTS) * 1e6).toFixed(0);
  console.log(`requests ${REQUESTS}, clients ${CLIENTS}, concurrency ${CONCURRENCY}`);
  console.log(
    `shared bucket in Postgres: ${sharedRun.perSecond.toFixed(0)}/s, p50 ${sharedRun.p50Ms.toFixed(2)} ms, p99 ${sharedRun.p99Ms.toFixed(2)} ms; ` +
      `CPU per request: Postgres ${us(postgresCpu)} µs, client ${us((processCpu.user + processCpu.system) / 1e6)} µs`,
  );
  console.log(
    `in-process bucket:         ${localRun.perSecond.toFixed(0)}/s, p50 ${(localRun.p50Ms * 1000).toFixed(1)} µs, p99 ${(localRun.p99Ms * 1000).toFixed(1)} µs`,
  );
} finally {
  await pool.query('DROP TABLE IF EXISTS rate_limit_buckets').catch(() => {});
  await pool.end();
  await postgres.stop();
}
