// `npm run bench:webhooks`: webhook deliveries per second to a local receiver at concurrency 64, next to a
// plain undici POST loop to the same receiver in the same run, and the latency from an event's commit
// to its delivery (issue 6). The receiver runs in a process of its own, so that it takes the same CPU
// from both loops rather than from the one it shares a process with. Its baselines (issue 25): the
// dispatcher's send path alone, and a minimal Postgres queue worker (`bench/lean/queue-worker.ts`)
// draining the same backlog to the same receiver, with the CPU per delivery of each process.
import { spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import { Session } from 'node:inspector/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { BearerGate, TokenBucketLimiter } from '@ofp/auth-tokens';
import { PgLogBus } from '@ofp/bus';
import { EventStore, migrateEventStore } from '@ofp/event-store';
import { createMetricsRegistry, createPool, ModuleRunner, PostgresSession, type Pool } from '@ofp/runtime';
import { closeServer, createHttpApp, listen } from '@ofp/http-api';
import { startScratchDatabase, testLogger, testSecrets } from '@ofp/testing';
import {
  createDeliverySender,
  createWebhookDispatcher,
  migrateWebhookDispatcher,
} from '@ofp/webhook-dispatcher';
import { startLean } from './lean.js';
import { databaseWithStatements, formatCensus, StatementCensus, type Census } from './statements.js';
import {
  CpuMeter,
  cpuPerUnit,
  loadGenerator,
  measure,
  postgresBackends,
  progressBar,
  warmUp,
  withCpu,
  type CpuParticipant,
  type CpuUsed,
} from './measure.js';

const CONCURRENCY = 64;
const EVENTS = Number(process.env.BENCH_EVENTS ?? 20_000);
/**
 * Deliveries before the measured ones, from the same backlog: the dispatcher is measured in its steady
 * state, not in its first seconds (see `warmUp`).
 */
const WARMUP_EVENTS = Number(process.env.BENCH_WARMUP_EVENTS ?? 8_000);
/** Seconds of each loop without the queue before measuring it. */
const WARMUP_SECONDS = 3;
/** Requests measured of each loop without the queue: a few seconds' worth. */
const LOOP_REQUESTS = 3 * EVENTS;
/** Versions per record: later ones wait for earlier ones (per-record order), as in real traffic. */
const VERSIONS = Number(process.env.BENCH_VERSIONS ?? 4);
/** Committed -> delivered latency: events committed at a steady rate (issue 17: 1,000/s), p50 and p99. */
const LATENCY_EVENTS = Number(process.env.BENCH_LATENCY_EVENTS ?? 5_000);
const LATENCY_RATE_PER_SECOND = Number(process.env.BENCH_LATENCY_RATE ?? 1_000);
/**
 * With BENCH_LATENCY_APPENDS=process the latency phase's events are appended by a process of their own
 * (as the api appends them in production), not by this one, where the dispatcher runs and shares its
 * event loop with the appends.
 */
const APPENDS_APART = process.env.BENCH_LATENCY_APPENDS === 'process';
const SEED_CONCURRENCY = 32;
/** The organization of the benchmark's events and webhook. */
const BENCH_ORG = 1;
/**
 * With BENCH_STATEMENTS=1: the statements, rows, buffers, WAL bytes and row writes (HOT updates among
 * them) per measured delivery, counted by pg_stat_statements (see `bench/statements.ts`).
 */
const COUNT_STATEMENTS = process.env.BENCH_STATEMENTS === '1';
/** How long the delivery phase may go without a delivery before the benchmark fails. */
const STALL_MS = 60_000;

/**
 * Where a delivery's latency goes, by stage, each timed by the clock of the process that saw it (the
 * dispatcher runs in this one, the receiver in its own; one machine): the event's commit (its
 * append's acknowledgement) to its delivery's queueing (the intake: the bus's read and the enqueue,
 * the record's `created_at`), to its first attempt's start (the wake-up, the claim and the wait for a
 * worker: the attempt's `started_at`), to its arrival at the receiver (signing and the POST).
 */
const STAGES = ['commit → queued', 'queued → sent', 'sent → arrived'] as const;

/** The lean queue worker's table (see `bench/lean/queue-worker.ts`): River's shape, narrowed. */
const LEAN_QUEUE_DDL = `CREATE TABLE lean_jobs (
  id bigserial PRIMARY KEY,
  state text NOT NULL DEFAULT 'available',
  scheduled_at timestamptz NOT NULL DEFAULT now(),
  attempt int NOT NULL DEFAULT 0,
  attempted_at timestamptz,
  finalized_at timestamptz,
  url text NOT NULL,
  payload text NOT NULL
);
CREATE INDEX lean_jobs_available ON lean_jobs (scheduled_at, id) WHERE state = 'available'`;

if (process.argv[2] === 'receiver') await runReceiver();
else if (process.argv[2] === 'appender') await runAppender(process.argv[3]!, Number(process.argv[4]));
else await runBenchmark();

/**
 * The receiver: answers every POST with 204, remembering when each `webhook-id` first arrived
 * (`GET /arrivals` hands them over), and counts requests (`GET /count`).
 */
async function runReceiver(): Promise<void> {
  let count = 0;
  const arrivals = new Map<string, number>();
  const server = createServer((req, res) => {
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(req.url === '/arrivals' ? [...arrivals] : { count }));
      return;
    }
    req.resume();
    req.on('end', () => {
      count++;
      const id = req.headers['webhook-id'];
      if (typeof id === 'string' && !arrivals.has(id)) arrivals.set(id, Date.now());
      res.writeHead(204);
      res.end();
    });
  });
  server.keepAliveTimeout = 60_000;
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${(server.address() as AddressInfo).port}\n`);
  });
  await new Promise(() => {});
}

/**
 * The latency phase's appends from a process of their own (BENCH_LATENCY_APPENDS=process): the events of
 * records `firstRecord` on, paced as {@link paceAppends} paces them, each event's id and the time its
 * append was acknowledged written to stdout as JSON once all are.
 */
async function runAppender(databaseUrl: string, firstRecord: number): Promise<void> {
  const pool = createPool({ connectionString: databaseUrl, applicationName: 'bench-appender', max: 16 });
  const committed = await paceAppends(new EventStore(pool, { outbox: false }), firstRecord);
  process.stdout.write(JSON.stringify([...committed]));
  await pool.end();
}

/**
 * Appends {@link LATENCY_EVENTS} events at {@link LATENCY_RATE_PER_SECOND}, one new record each from
 * `firstRecord` on: each event's id and when its append was acknowledged.
 */
async function paceAppends(
  store: EventStore,
  firstRecord: number,
  progress?: (appended: number) => void,
): Promise<Map<string, number>> {
  const committed = new Map<string, number>();
  const start = performance.now();
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < LATENCY_EVENTS; i++) {
    const due = start + (i * 1000) / LATENCY_RATE_PER_SECOND;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    inFlight.push(
      appendPerson(store, BENCH_ORG, firstRecord + i, 1).then((eventId) => {
        committed.set(eventId, Date.now());
      }),
    );
    if (i % 100 === 0) progress?.(i);
  }
  await Promise.all(inFlight);
  return committed;
}

/** An appender process's events, each with the time its append was acknowledged. */
async function appendApart(databaseUrl: string, firstRecord: number): Promise<Map<string, number>> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(import.meta.url), 'appender', databaseUrl, String(firstRecord)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`the appender process exited with ${code}`);
  return new Map(JSON.parse(output) as [string, number][]);
}

async function runBenchmark(): Promise<void> {
  const logger = testLogger('bench');
  const receiverProcess = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(import.meta.url), 'receiver'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const port = await new Promise<number>((resolve) =>
    receiverProcess.stdout.once('data', (data: Buffer) => resolve(Number(data.toString().trim()))),
  );
  const receiverUrl = `http://127.0.0.1:${port}`;
  const receiverAgent = new Agent({ connections: 4 });
  const receiverGet = async <T>(path: string): Promise<T> => {
    const response = await request(`${receiverUrl}${path}`, { dispatcher: receiverAgent });
    return (await response.body.json()) as T;
  };

  const database = await (COUNT_STATEMENTS ? databaseWithStatements : startScratchDatabase)(
    logger,
    'bench_webhooks',
  );
  const databaseUrl = database.url;
  const pool = createPool({ connectionString: databaseUrl, applicationName: 'bench-webhooks', max: 40 });
  const postgres = await postgresBackends(databaseUrl);

  try {
    // The raw loop: a plain undici POST of a body the size of a delivery's, at the same concurrency.
    const body = JSON.stringify({
      id: randomUUID(),
      type: 'person.updated',
      timestamp: new Date().toISOString(),
      sequence: 2,
      data: { id: 1, first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', version: 2 },
      previous_attributes: { first_name: 'Augusta' },
    });
    const rawAgent = new Agent({ connections: CONCURRENCY });
    const post = async (): Promise<void> => {
      const response = await request(`${receiverUrl}/raw`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
        dispatcher: rawAgent,
      });
      await response.body.dump();
    };
    await warmUp(WARMUP_SECONDS, CONCURRENCY, post);
    const { result: raw, cpu: rawCpu } = await withCpu([loadGenerator('bench')], () =>
      measure(LOOP_REQUESTS, CONCURRENCY, post),
    );
    await rawAgent.close();

    // The dispatcher's send path alone, without the queue: the same signed POSTs through the same sender
    // (SSRF guard, timeouts), which bounds what the whole dispatcher can reach.
    const limits = {
      concurrency: CONCURRENCY,
      claimAhead: 4 * CONCURRENCY,
      endpointConcurrency: 8 * CONCURRENCY,
    };
    const sender = createDeliverySender({ clock: () => new Date(), allowPrivateTargets: true, limits });
    const secrets = [`whsec_${randomBytes(32).toString('base64')}`];
    const send = async (): Promise<void> => {
      const attempt = await sender.deliver({
        url: `${receiverUrl}/send`,
        eventId: randomUUID(),
        payload: body,
        secrets,
      });
      if (attempt.statusCode !== 204) throw new Error(`send path: ${attempt.error ?? attempt.statusCode}`);
    };
    await warmUp(WARMUP_SECONDS, CONCURRENCY, send);
    const { result: sendOnly, cpu: sendCpu } = await withCpu([loadGenerator('bench')], () =>
      measure(LOOP_REQUESTS, CONCURRENCY, send),
    );
    await sender.close();

    await migrateEventStore(pool, logger);
    await migrateWebhookDispatcher(pool, logger);
    const store = new EventStore(pool, { outbox: false });
    const orgId = BENCH_ORG;
    // Any bearer token is the benchmark's organization: only the webhook's creation goes through HTTP.
    const gate = new BearerGate(
      {
        verify: () =>
          Promise.resolve({
            clientId: 'bench',
            orgId,
            scopes: ['read', 'write'],
            grantId: 'bench',
            tokenId: 'bench',
            issuedAt: new Date(),
            expiresAt: new Date(Date.now() + 3_600_000),
          }),
      },
      new TokenBucketLimiter({ capacity: 1_000, refillPerSecond: 1_000 }, () => new Date()),
    );
    const session = new PostgresSession({ connectionString: databaseUrl, applicationName: 'bench', logger });
    const dispatcher = createWebhookDispatcher({
      secrets: testSecrets(),
      pool,
      session,
      store,
      bus: new PgLogBus(pool, session, store, logger, { batchSize: 500, pollIntervalMs: 50 }),
      logger,
      clock: () => new Date(),
      gate,
      publicUrl: 'http://localhost',
      allowPrivateTargets: true,
      // 64 requests in flight at most (the worker pool). The endpoint limit counts what is claimed, in flight
      // or about to be, so it is set above the pool plus what is claimed ahead to leave the pool as the limit.
      limits,
    });
    const app = createHttpApp({
      logger,
      metrics: createMetricsRegistry('bench'),
      ready: () => true,
      routes: dispatcher.routes,
    });
    const modules = new ModuleRunner([session, dispatcher.delivery, dispatcher.intake], logger);
    const api = await listen(app, 0, '127.0.0.1');
    const created = await request(`http://127.0.0.1:${api.port}/v2/webhooks`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer bench' },
      body: JSON.stringify({ url: `${receiverUrl}/hooks`, events: ['*'] }),
    });
    if (created.statusCode !== 201) throw new Error(`webhook not created: ${await created.body.text()}`);
    await created.body.dump();

    // Seeding: the events are committed before the dispatcher starts, so it works off a backlog.
    const bar = progressBar('seeding  [{bar}] {percentage}% | {value}/{total} events | {duration}s');
    const backlog = WARMUP_EVENTS + EVENTS;
    bar.start(backlog, 0);
    const records = backlog / VERSIONS;
    let appended = 0;
    for (let version = 1; version <= VERSIONS; version++) {
      let next = 0;
      await Promise.all(
        Array.from({ length: SEED_CONCURRENCY }, async () => {
          for (let n = next++; n < records; n = next++) {
            await appendPerson(store, orgId, 1 + n, version);
            if (++appended % 500 === 0) bar.update(appended);
          }
        }),
      );
    }
    bar.update(backlog);
    bar.stop();

    const delivered = async (): Promise<number> => (await receiverGet<{ count: number }>('/count')).count;
    await modules.start();
    let census: Census | undefined;
    const dispatcherRun = await drain(
      'delivery',
      backlog,
      [loadGenerator('dispatcher'), postgres],
      delivered,
      async () => {
        const profiled = await profileThisProcess();
        const counting = COUNT_STATEMENTS
          ? await StatementCensus.start(databaseUrl, ['webhooks'])
          : undefined;
        return async () => {
          await profiled();
          census = await counting?.stop();
        };
      },
    );
    // Latency: events committed at a steady rate while the dispatcher idles, each timed from its commit
    // (the append's acknowledgement) to its first arrival at the receiver (both clocks: this machine's).
    const paced = progressBar(
      `latency  [{bar}] {percentage}% | {value}/{total} events at {rate}/s${APPENDS_APART ? ', appended by a process of their own' : ''} | {duration}s`,
    );
    paced.start(LATENCY_EVENTS, 0, { rate: LATENCY_RATE_PER_SECOND });
    const pacedCounting = COUNT_STATEMENTS
      ? await StatementCensus.start(databaseUrl, ['webhooks'])
      : undefined;
    const committed = APPENDS_APART
      ? await appendApart(databaseUrl, records + 1)
      : await paceAppends(store, records + 1, (appended) => paced.update(appended));
    paced.update(LATENCY_EVENTS);
    paced.stop();
    let arrivals = new Map<string, number>();
    for (const deadline = Date.now() + 60_000; Date.now() < deadline;) {
      arrivals = new Map(await receiverGet<[string, number][]>('/arrivals'));
      if ([...committed.keys()].every((id) => arrivals.has(id))) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const latencies = [...committed]
      .map(([id, at]) => (arrivals.get(id) ?? Number.NaN) - at)
      .sort((a, b) => a - b);
    const quantile = (q: number): number =>
      latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!;
    const pacedCensus = await pacedCounting?.stop();
    const stages = await latencyStages(pool, committed, arrivals);

    await modules.stop();
    await closeServer(api.server);

    // The lean queue worker drains a backlog of the same size to the same receiver.
    await pool.query(LEAN_QUEUE_DDL);
    await pool.query(`INSERT INTO lean_jobs (url, payload) SELECT $1, $2 FROM generate_series(1, $3::int)`, [
      `${receiverUrl}/lean`,
      body,
      backlog,
    ]);
    await pool.query('VACUUM ANALYZE lean_jobs');
    const lean = await startLean('queue-worker', {
      DATABASE_URL: databaseUrl,
      CONCURRENCY: String(CONCURRENCY),
      SECRET: secrets[0]!,
    });
    const leanRun = await drain('lean', backlog, [lean.cpu, postgres], delivered).finally(() => lean.stop());

    const perSecond = dispatcherRun.measured / dispatcherRun.seconds;
    const ratio = (100 * perSecond) / raw.perSecond;
    const us = (cpu: CpuUsed, name: string, units: number): string => {
      const value = cpuPerUnit(cpu, name, units);
      return value === undefined ? 'n/a' : value.toFixed(0);
    };
    const lines = [
      '',
      `Webhook deliveries to one local receiver, concurrency ${CONCURRENCY}: ${dispatcherRun.measured} measured after ${backlog - dispatcherRun.measured} of a backlog of ${backlog} events (${records} records x ${VERSIONS} versions)`,
      `  dispatcher (bus intake + queue + signed POST): ${perSecond.toFixed(0).padStart(6)} deliveries/s  (${dispatcherRun.seconds.toFixed(2)} s)`,
      `  raw undici POST loop, same receiver:          ${raw.perSecond.toFixed(0).padStart(6)} requests/s    (${raw.seconds.toFixed(2)} s)`,
      `  ratio: ${ratio.toFixed(0)}% of the raw rate (target >= 60%)`,
      `  the send path alone (signed POSTs through the dispatcher's sender, no queue): ${sendOnly.perSecond.toFixed(0)} requests/s, ${((100 * sendOnly.perSecond) / raw.perSecond).toFixed(0)}% of the raw rate`,
      `  this process's CPU per request: raw loop ${us(rawCpu, 'bench', LOOP_REQUESTS)} us, send path ${us(sendCpu, 'bench', LOOP_REQUESTS)} us (signing, SSRF guard, deadline)`,
      `  lean queue worker (claim, signed POST, complete; jobs queued beforehand): ${(leanRun.measured / leanRun.seconds).toFixed(0)} deliveries/s; the dispatcher reached ${((100 * perSecond * leanRun.seconds) / leanRun.measured).toFixed(0)}% of its rate`,
      `  CPU µs per delivery: dispatcher ${us(dispatcherRun.cpu, 'dispatcher', dispatcherRun.measured)}, its Postgres ${us(dispatcherRun.cpu, postgres.name, dispatcherRun.measured)} | lean worker ${us(leanRun.cpu, 'lean', leanRun.measured)}, its Postgres ${us(leanRun.cpu, postgres.name, leanRun.measured)} (this database's backends)`,
      `Event committed -> delivered, ${LATENCY_EVENTS} events at ${LATENCY_RATE_PER_SECOND}/s${APPENDS_APART ? ' (appended by a process of their own)' : ''}: p50 ${quantile(0.5).toFixed(1)} ms, p99 ${quantile(0.99).toFixed(1)} ms` +
        (latencies.some(Number.isNaN) ? ' (some never arrived!)' : ''),
      ...formatStages(stages),
      ...(census
        ? [
            '',
            'Postgres statements of the measured deliveries:',
            ...formatCensus(census, dispatcherRun.measured, 'delivery'),
          ]
        : []),
      ...(pacedCensus
        ? [
            '',
            `Postgres statements at ${LATENCY_RATE_PER_SECOND} events/s (the benchmark's appends among them):`,
            ...formatCensus(pacedCensus, LATENCY_EVENTS, 'delivery'),
          ]
        : []),
      '',
    ];
    process.stdout.write(lines.join('\n'));
  } finally {
    receiverProcess.kill();
    await receiverAgent.close();
    await postgres.close?.();
    await pool.end();
    await database.stop();
  }
}

interface Drained {
  /** Deliveries after the warm-up, measured. */
  readonly measured: number;
  readonly seconds: number;
  readonly cpu: CpuUsed;
}

/**
 * With `BENCH_CPU_PROF_DIR`: a V8 CPU profile of this process (the dispatcher runs in it) from now until
 * the returned function is called, written there as `dispatcher-<time>.cpuprofile`; with
 * `BENCH_HEAP_PROF_DIR`, V8's sampling heap profile of the same span, of every allocation sampled (those
 * collected since included), as `dispatcher-<time>.heapprofile`. Otherwise nothing.
 */
async function profileThisProcess(): Promise<() => Promise<void>> {
  const cpuDir = process.env.BENCH_CPU_PROF_DIR;
  const heapDir = process.env.BENCH_HEAP_PROF_DIR;
  if (!cpuDir && !heapDir) return () => Promise.resolve();
  const session = new Session();
  session.connect();
  if (cpuDir) {
    await session.post('Profiler.enable');
    await session.post('Profiler.start');
  }
  if (heapDir) {
    await session.post('HeapProfiler.enable');
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: 16_384,
      includeObjectsCollectedByMajorGC: true,
      includeObjectsCollectedByMinorGC: true,
    });
  }
  const save = async (dir: string, kind: string, profile: unknown): Promise<void> => {
    await mkdir(dir, { recursive: true });
    const file = join(dir, `dispatcher-${Date.now()}.${kind}`);
    await writeFile(file, JSON.stringify(profile));
    process.stderr.write(`dispatcher ${kind} of the measured deliveries: ${file}\n`);
  };
  return async () => {
    if (cpuDir) await save(cpuDir, 'cpuprofile', (await session.post('Profiler.stop')).profile);
    if (heapDir)
      await save(heapDir, 'heapprofile', (await session.post('HeapProfiler.stopSampling')).profile);
    session.disconnect();
  };
}

/**
 * Waits while `backlog` deliveries arrive at the receiver (`delivered` counts all it ever had),
 * accounting the participants' CPU time after the first `WARMUP_EVENTS` of them (and observing them
 * with `observe`, when given: it starts, and returns what stops); a delivery that never comes fails the
 * run after `STALL_MS`.
 */
async function drain(
  label: string,
  backlog: number,
  participants: readonly CpuParticipant[],
  delivered: () => Promise<number>,
  observe?: () => Promise<() => Promise<void>>,
): Promise<Drained> {
  const before = await delivered();
  const progress = progressBar(
    `${label.padEnd(8)} [{bar}] {percentage}% | {value}/{total} deliveries (warm-up first) | {duration}s`,
  );
  progress.start(backlog, 0);
  let measuring: { delivered: number; at: number; meter: CpuMeter } | undefined;
  let observed: (() => Promise<void>) | undefined;
  try {
    for (let seen = 0, movedAt = performance.now(); ;) {
      const done = (await delivered()) - before;
      progress.update(Math.min(done, backlog));
      if (measuring === undefined && done >= WARMUP_EVENTS) {
        observed = await observe?.();
        measuring = { delivered: done, at: performance.now(), meter: await CpuMeter.start(participants) };
      }
      if (done >= backlog) break;
      if (done > seen) [seen, movedAt] = [done, performance.now()];
      // A delivery that never comes must fail the benchmark, not hang it.
      else if (performance.now() - movedAt > STALL_MS)
        throw new Error(`${label}: stalled, ${done} of ${backlog} delivered, none for ${STALL_MS / 1000} s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const seconds = (performance.now() - measuring!.at) / 1000;
    const cpu = await measuring!.meter.stop();
    await observed?.();
    return { measured: backlog - measuring!.delivered, seconds, cpu };
  } catch (error) {
    await measuring?.meter.stop();
    await observed?.();
    throw error;
  } finally {
    progress.stop();
  }
}

/** Each delivered event's milliseconds in each of {@link STAGES}. */
type StageTimes = readonly (readonly number[])[];

async function latencyStages(
  pool: Pool,
  committed: ReadonlyMap<string, number>,
  arrivals: ReadonlyMap<string, number>,
): Promise<StageTimes> {
  const { rows } = await pool.query<{ event_id: string; queued: number; sent: number }>(
    `SELECT d.event_id, extract(epoch FROM d.created_at) * 1000 AS queued,
            extract(epoch FROM a.started_at) * 1000 AS sent
       FROM webhooks.webhook_deliveries d
       JOIN webhooks.webhook_deliveries__attempt_log a ON a.record_id = d.id AND a.ordinal = 0
      WHERE d.event_id = ANY($1::text[])`,
    [[...committed.keys()]],
  );
  return rows.flatMap(({ event_id: id, queued, sent }) => {
    const arrived = arrivals.get(id);
    return arrived === undefined ? [] : [[queued - committed.get(id)!, sent - queued, arrived - sent]];
  });
}

/**
 * Each stage's p50 and p99, and how the slowest 1% of deliveries (end to end) spent their time: the
 * stages' p99s do not add up to the whole's, the slowest deliveries' own times do.
 */
function formatStages(times: StageTimes): string[] {
  if (times.length === 0) return [];
  const total = (each: readonly number[]): number => each.reduce((sum, ms) => sum + ms, 0);
  const at = (sorted: readonly number[], q: number): number =>
    sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  const slowest = [...times].sort((a, b) => total(b) - total(a)).slice(0, Math.ceil(times.length / 100));
  return [
    `  by stage (${times.length} delivered), p50 / p99 / mean of the slowest 1% (whose total is ${(total(slowest.map(total)) / slowest.length).toFixed(1)} ms):`,
    ...STAGES.map((stage, i) => {
      const sorted = times.map((each) => each[i]!).sort((a, b) => a - b);
      const slow = total(slowest.map((each) => each[i]!)) / slowest.length;
      return `    ${stage.padEnd(16)} ${at(sorted, 0.5).toFixed(1)} / ${at(sorted, 0.99).toFixed(1)} / ${slow.toFixed(1)} ms`;
    }),
  ];
}

/** Appends `person.created|updated` of `people-<id>` at `version`, as the api would; resolves with its id. */
async function appendPerson(store: EventStore, orgId: number, id: number, version: number): Promise<string> {
  const at = new Date().toISOString();
  const eventId = randomUUID();
  await store.append({
    streamId: `people-${id}`,
    streamType: 'people',
    expectedVersion: version - 1,
    orgId,
    events: [
      {
        eventId,
        type: version === 1 ? 'person.created' : 'person.updated',
        data: {
          record: {
            id,
            first_name: `First ${version}`,
            last_name: `Last ${id}`,
            created_at: at,
            updated_at: at,
            version,
          },
          previous: version === 1 ? {} : { first_name: `First ${version - 1}` },
          deleted: false,
        },
      },
    ],
  });
  return eventId;
}
