// Shared measurement for the benchmarks: a closed loop of `concurrency` workers and an open loop at a fixed
// rate, latency per operation; and the CPU time each process involved spent, read from /proc.
import { Presets, SingleBar } from 'cli-progress';
import { readFileSync } from 'node:fs';
import { Writable } from 'node:stream';
import { performance } from 'node:perf_hooks';
import pg from 'pg';

export interface Measurement {
  readonly operations: number;
  readonly seconds: number;
  readonly perSecond: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
}

/** The median of `values` (the mean of the middle two when there is an even number). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** Runs `operation(i)` `count` times, `concurrency` at a time, and measures throughput and latency. */
export async function measure(
  count: number,
  concurrency: number,
  operation: (i: number) => Promise<void>,
): Promise<Measurement> {
  const latencies = new Float64Array(count);
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let i = next++; i < count; i = next++) {
        const begun = performance.now();
        await operation(i);
        latencies[i] = performance.now() - begun;
      }
    }),
  );
  return summarize(latencies, (performance.now() - started) / 1000);
}

/** Runs `operation(i)` for `seconds`, `concurrency` at a time, and measures throughput and latency. */
export async function measureFor(
  seconds: number,
  concurrency: number,
  operation: (i: number) => Promise<void>,
): Promise<Measurement> {
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  const until = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        const begun = performance.now();
        await operation(next++);
        latencies.push(performance.now() - begun);
      }
    }),
  );
  return summarize(Float64Array.from(latencies), (performance.now() - started) / 1000);
}

/**
 * Starts `operation(i)` at `ratePerSecond` for `seconds`, whether or not earlier ones have finished (an
 * open loop, as independent clients arrive), and measures each one's latency. Below saturation this is
 * the latency a client sees; a closed loop at saturation mostly measures the queue in front of the
 * busiest core. Operations are started on timers, a few per timer tick at high rates; each is timed
 * from its start, and `perSecond` is the rate reached (below the one asked when the loop fell behind).
 */
export async function measureAtRate(
  ratePerSecond: number,
  seconds: number,
  operation: (i: number) => Promise<void>,
): Promise<Measurement> {
  const count = Math.max(1, Math.round(ratePerSecond * seconds));
  const latencies = new Float64Array(count);
  const inFlight: Promise<void>[] = [];
  let failure: { error: unknown } | undefined;
  const started = performance.now();
  for (let i = 0; i < count && failure === undefined;) {
    const now = performance.now();
    for (
      const due = Math.floor(((now - started) * ratePerSecond) / 1000) + 1;
      i < Math.min(due, count);
      i++
    ) {
      const n = i;
      const begun = performance.now();
      inFlight.push(
        operation(n).then(
          () => {
            latencies[n] = performance.now() - begun;
          },
          (error: unknown) => {
            failure ??= { error };
          },
        ),
      );
    }
    if (i < count) {
      const nextAt = started + (i * 1000) / ratePerSecond;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, nextAt - performance.now())));
    }
  }
  await Promise.all(inFlight);
  if (failure !== undefined) throw failure.error;
  return summarize(latencies, (performance.now() - started) / 1000);
}

function summarize(latencies: Float64Array, seconds: number): Measurement {
  const sorted = latencies.slice().sort();
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return {
    operations: latencies.length,
    seconds,
    perSecond: latencies.length / seconds,
    p50Ms: at(0.5),
    p90Ms: at(0.9),
    p99Ms: at(0.99),
  };
}

/**
 * Runs `operation` at `concurrency` for `seconds`, before measuring: a process that just started
 * spends several times its steady CPU per request for its first seconds (V8 compiles the hot paths,
 * Postgres fills its plan and catalog caches), and a server is measured in its steady state.
 */
export async function warmUp(
  seconds: number,
  concurrency: number,
  operation: (i: number) => Promise<void>,
): Promise<void> {
  const until = performance.now() + seconds * 1000;
  while (performance.now() < until) await measure(10 * concurrency, concurrency, operation);
}

/**
 * Runs `operation` at `concurrency` until it has run `operations` times, or for `maxSeconds` on a
 * machine too slow for them. V8 optimizes a function once it has run often enough, not after a time:
 * the platform's person write still had about a hundred functions compiled during the row measured
 * after 3 s of warm-up, and its first writes cost up to twice the CPU they did once compiled
 * (docs/benchmarks.md).
 * @returns the operations run and the seconds they took.
 */
export async function warmUpFor(
  operations: number,
  maxSeconds: number,
  concurrency: number,
  operation: (i: number) => Promise<void>,
): Promise<{ operations: number; seconds: number }> {
  const started = performance.now();
  const until = started + maxSeconds * 1000;
  let done = 0;
  while (done < operations && performance.now() < until) {
    const count = Math.min(10 * concurrency, operations - done);
    await measure(count, concurrency, (i) => operation(done + i));
    done += count;
  }
  return { operations: done, seconds: (performance.now() - started) / 1000 };
}

/** One table row: the measured system next to its raw baseline, and the throughput ratio. */
export function formatRow(name: string, system: Measurement, raw: Measurement, rawLabel = 'raw'): string {
  const ratio = (100 * system.perSecond) / raw.perSecond;
  const cell = (m: Measurement): string =>
    `${m.perSecond.toFixed(0).padStart(7)}/s  p50 ${m.p50Ms.toFixed(2).padStart(6)} ms  p99 ${m.p99Ms.toFixed(2).padStart(6)} ms`;
  return `${name.padEnd(26)} ${cell(system)}   | ${rawLabel} ${cell(raw)}   | ${ratio.toFixed(0).padStart(3)}%`;
}

/** Latency of an open-loop run, with the rate it ran at: `1450/s p50 1.21 p90 2.40 p99 4.52 ms`. */
export function formatLatency(m: Measurement): string {
  return `${m.perSecond.toFixed(0).padStart(6)}/s p50 ${m.p50Ms.toFixed(2).padStart(6)} p90 ${m.p90Ms.toFixed(2).padStart(6)} p99 ${m.p99Ms.toFixed(2).padStart(6)} ms`;
}

// --- CPU time per process ---------------------------------------------------------------------------

/** Linux's USER_HZ: the unit of the CPU times in /proc/<pid>/stat. */
const CLOCK_TICKS_PER_SECOND = 100;

/**
 * CPU seconds (user and system, all threads) that process `pid` has used, from `/proc/<pid>/stat`;
 * undefined when there is no such process here, or when it is not a `command` (`postgres`, `node`):
 * a pid from another machine's Postgres may name an unrelated local process.
 */
export function processCpuSeconds(pid: number, command?: string): number | undefined {
  // Read synchronously: a promise read goes through the thread pool with four operations, which cost the
  // benchmark's own process (where the webhook dispatcher runs) a tenth of its CPU at every 250 ms sample.
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  const open = stat.indexOf('(');
  const close = stat.lastIndexOf(')');
  if (command !== undefined && stat.slice(open + 1, close) !== command) return undefined;
  // Fields after the parenthesized command name; utime and stime are the 14th and 15th of the line.
  const fields = stat.slice(close + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
}

/** Processes whose CPU time is accounted together under one name. */
export interface CpuParticipant {
  readonly name: string;
  /** Their ids at this moment: asked at every sample, as Postgres backends come and go. */
  pids(): Promise<readonly number[]>;
  /** What `/proc/<pid>/stat` must name them (see {@link processCpuSeconds}). */
  readonly command?: string;
  /** Releases what `pids` holds (a connection). */
  close?(): Promise<void>;
}

/** Fixed processes (the platform's, a receiver's). */
export function processes(name: string, pids: readonly number[]): CpuParticipant {
  return { name, pids: () => Promise.resolve(pids) };
}

/** This process: the load generator (its HTTP or pg client, and the benchmark's own bookkeeping). */
export function loadGenerator(name = 'load generator'): CpuParticipant {
  return processes(name, [process.pid]);
}

/**
 * The backends of the database `connectionString` names (every client's, background workers of other
 * databases excluded), found in `pg_stat_activity` through a connection of its own that does not count
 * itself. Only measurable when Postgres runs on this machine; otherwise every reading is undefined.
 */
export async function postgresBackends(connectionString: string, name = 'postgres'): Promise<CpuParticipant> {
  const client = new pg.Client({ connectionString, application_name: 'bench-cpu-meter' });
  await client.connect();
  return {
    name,
    command: 'postgres',
    async pids() {
      const { rows } = await client.query<{ pid: number }>(
        'SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
      );
      return rows.map((row) => row.pid);
    },
    close: () => client.end(),
  };
}

/** CPU seconds per participant over a measured span; undefined where its processes could not be read. */
export type CpuUsed = ReadonlyMap<string, number | undefined>;

/**
 * Accounts the CPU time of participants over a span of work. Processes are sampled every
 * `intervalMs`, so that one that exits during the span (a pool retiring a connection) loses at most
 * an interval of its time, and one that starts during it counts from zero.
 */
export class CpuMeter {
  private readonly first = new Map<string, Map<number, number>>();
  private readonly last = new Map<string, Map<number, number>>();
  private readonly unreadable = new Set<string>();
  /** CPU seconds this process spent reading the others' (and its own) since the start. */
  private ownSeconds = 0;
  private timer: NodeJS.Timeout | undefined;
  private sampling: Promise<void> = Promise.resolve();

  private constructor(
    private readonly participants: readonly CpuParticipant[],
    private readonly intervalMs: number,
  ) {}

  /** Starts accounting now. */
  static async start(participants: readonly CpuParticipant[], intervalMs = 250): Promise<CpuMeter> {
    const meter = new CpuMeter(participants, intervalMs);
    await meter.sample(true);
    meter.timer = setInterval(() => {
      meter.sampling = meter.sampling.then(() => meter.sample(false));
    }, intervalMs);
    return meter;
  }

  /** Stops accounting and answers each participant's CPU seconds since `start`. */
  async stop(): Promise<CpuUsed> {
    clearInterval(this.timer);
    await this.sampling;
    await this.sample(false);
    const used = new Map<string, number | undefined>();
    for (const { name } of this.participants) {
      if (this.unreadable.has(name)) {
        used.set(name, undefined);
        continue;
      }
      const first = this.first.get(name)!;
      let seconds = 0;
      for (const [pid, at] of this.last.get(name)!) seconds += at - (first.get(pid) ?? 0);
      if (first.has(process.pid)) seconds = Math.max(0, seconds - this.ownSeconds);
      used.set(name, seconds);
    }
    return used;
  }

  private async sample(initial: boolean): Promise<void> {
    for (const participant of this.participants) {
      const { name } = participant;
      if (!this.first.has(name)) [this.first, this.last].forEach((readings) => readings.set(name, new Map()));
      const first = this.first.get(name)!;
      const last = this.last.get(name)!;
      const pids = await participant.pids();
      const reading = process.cpuUsage();
      for (const pid of pids) {
        // Undefined for a process that exited since it was listed (a backend retired by its pool).
        const seconds = processCpuSeconds(pid, participant.command);
        if (seconds === undefined) continue;
        if (initial) first.set(pid, seconds);
        last.set(pid, seconds);
      }
      // What reading costs this process is not the work measured in it (the webhook dispatcher runs in
      // the benchmark's own process): it is taken off this process's time below.
      const { user, system } = process.cpuUsage(reading);
      if (!initial) this.ownSeconds += (user + system) / 1e6;
      // Listed but none of them here: processes of another machine.
      if (initial && pids.length > 0 && last.size === 0) this.unreadable.add(name);
    }
  }
}

/**
 * Waits until `participant`'s processes are idle: less than `busyShare` of a core over a window of
 * `windowMs` (the CPU ticks of /proc are 10 ms), so that a measurement that starts after work which
 * left them a backlog (appends their consumers still handle) is not charged for it. Gives up after
 * `timeoutMs`. @returns the seconds waited, and whether they went idle.
 */
export async function untilIdle(
  participant: CpuParticipant,
  { windowMs = 500, busyShare = 0.05, timeoutMs = 30_000 } = {},
): Promise<{ seconds: number; idle: boolean }> {
  const started = performance.now();
  for (;;) {
    const { cpu } = await withCpu(
      [participant],
      () => new Promise((resolve) => setTimeout(resolve, windowMs)),
    );
    const waited = (performance.now() - started) / 1000;
    if ((cpu.get(participant.name) ?? 0) < (busyShare * windowMs) / 1000)
      return { seconds: waited, idle: true };
    if (waited * 1000 >= timeoutMs) return { seconds: waited, idle: false };
  }
}

/** Runs `work` while accounting the participants' CPU time. */
export async function withCpu<T>(
  participants: readonly CpuParticipant[],
  work: () => Promise<T>,
): Promise<{ result: T; cpu: CpuUsed }> {
  const meter = await CpuMeter.start(participants);
  try {
    const result = await work();
    return { result, cpu: await meter.stop() };
  } catch (error) {
    await meter.stop();
    throw error;
  }
}

/** Microseconds of CPU per unit of work, or undefined when not measured. */
export function cpuPerUnit(cpu: CpuUsed, name: string, units: number): number | undefined {
  const seconds = cpu.get(name);
  return seconds === undefined ? undefined : (seconds * 1e6) / units;
}

/** `platform 120 µs + postgres 210 µs + load generator 60 µs = 390 µs per request`. */
export function formatCpu(cpu: CpuUsed, units: number, unit = 'request'): string {
  const parts = [...cpu.keys()].map((name) => {
    const us = cpuPerUnit(cpu, name, units);
    return `${name} ${us === undefined ? 'n/a' : us.toFixed(0)} µs`;
  });
  const values = [...cpu.values()];
  const total = values.every((v) => v !== undefined)
    ? ` = ${((values.reduce((a, b) => a + b, 0) * 1e6) / units).toFixed(0)} µs`
    : '';
  return `${parts.join(' + ')}${total} per ${unit}`;
}

/** A piece of work measured at its maximum rate and at half of it, with the CPU time of both. */
export interface RateProfile {
  readonly max: Measurement;
  readonly maxCpu: CpuUsed;
  readonly half: Measurement;
  readonly halfCpu: CpuUsed;
}

/**
 * Runs `operation` at `concurrency` for `seconds` (its maximum rate), then for `seconds` at half the
 * rate reached, accounting the participants' CPU time in both.
 */
export async function maxAndHalfRate(
  participants: readonly CpuParticipant[],
  seconds: number,
  concurrency: number,
  operation: (i: number) => Promise<void>,
): Promise<RateProfile> {
  const max = await withCpu(participants, () => measureFor(seconds, concurrency, operation));
  const half = await withCpu(participants, () => measureAtRate(max.result.perSecond / 2, seconds, operation));
  return { max: max.result, maxCpu: max.cpu, half: half.result, halfCpu: half.cpu };
}

/** Header and rows of a table of rate profiles: rate, CPU per unit by participant, latency at half rate. */
export function profileTable(
  participants: readonly string[],
  unit: string,
): {
  header: string;
  row: (name: string, profile: RateProfile) => string;
} {
  const width = Math.max(8, ...participants.map((name) => name.length));
  const cpuHeader = participants.map((name) => name.padStart(width)).join(' ');
  return {
    header: [
      `${''.padEnd(26)} ${'maximum rate'.padEnd(35)} | ${`CPU µs per ${unit}, at the maximum rate`.padEnd(cpuHeader.length)} | at half the maximum rate`,
      `${''.padEnd(26)} ${'rate'.padStart(8)} ${'p50'.padStart(8)} ${'p99'.padStart(8)} ms   | ${cpuHeader} |`,
    ].join('\n'),
    row: (name, { max, maxCpu, half }) => {
      const cpu = participants
        .map((participant) => {
          const us = cpuPerUnit(maxCpu, participant, max.operations);
          return (us === undefined ? 'n/a' : us.toFixed(0)).padStart(width);
        })
        .join(' ');
      return `${name.padEnd(26)} ${`${max.perSecond.toFixed(0)}/s`.padStart(8)} ${max.p50Ms.toFixed(2).padStart(8)} ${max.p99Ms.toFixed(2).padStart(8)}      | ${cpu} | ${formatLatency(half)}`;
    },
  };
}

/**
 * The node options of a platform (or lean) process for profiling: with `BENCH_CPU_PROF_DIR` set, it
 * writes a V8 CPU profile there when it exits (open it in Chrome DevTools or speedscope); with
 * `BENCH_PERF_MAP=1`, it writes `/tmp/perf-<pid>.map`, which names its JavaScript functions in an
 * on-CPU sample of `perf record -e cpu-clock -g -p <pid>`. Otherwise none.
 */
export function cpuProfileOptions(): string[] {
  const dir = process.env.BENCH_CPU_PROF_DIR;
  return [
    ...(dir ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : []),
    ...(process.env.BENCH_PERF_MAP === '1' ? ['--perf-basic-prof'] : []),
  ];
}

/**
 * A progress bar for a long step (seeding, a backlog): drawn in place on a terminal, and a line every
 * 5 s where output is a file or a pipe (CI), so that a long run never looks hung.
 */
export function progressBar(format: string): SingleBar {
  return new SingleBar({ format, noTTYOutput: true, notTTYSchedule: 5_000 }, Presets.shades_classic);
}

// --- Bytes allocated per process ----------------------------------------------------------------------

/** What a process's garbage collections told, summed since it started. */
export interface Collections {
  /** Bytes its V8 heap allocated (JavaScript's objects and strings, not native buffers). */
  readonly allocated: number;
  /** Bytes that survived the young generation into the old. */
  readonly promoted: number;
  /** Milliseconds its main thread stood still for them. */
  readonly pauseMs: number;
}

const NO_COLLECTIONS: Collections = { allocated: 0, promoted: 0, pauseMs: 0 };

/** `a` and `b` added, each figure times `sign` for `b` (-1: what came between `b` and `a`). */
export function addCollections(a: Collections, b: Collections, sign: 1 | -1 = 1): Collections {
  return {
    allocated: a.allocated + sign * b.allocated,
    promoted: a.promoted + sign * b.promoted,
    pauseMs: a.pauseMs + sign * b.pauseMs,
  };
}

/**
 * What a process's V8 heap allocated, read from the line V8 writes to its stdout at every garbage
 * collection with `--trace-gc-nvp` (`[<pid>:<isolate>] <ms> ms: pause=<ms> ... allocated=<bytes>
 * promoted=<bytes> ...`, the bytes allocated since the collection before). The sum over the collections
 * in a span is the bytes allocated over a span as long, shifted back to the collection before its start:
 * over seconds of work with several collections a second, an estimate without a bias, which the
 * machine's load does not move as it moves CPU time.
 */
export class AllocationTrace {
  /** The node options that make a process write the lines this reads. */
  static readonly options: readonly string[] = ['--trace-gc-nvp'];
  private readonly totals = new Map<number, Collections>();

  /** Reads one line of a process's output: true when it was a collection's, which it then counts. */
  read(line: string): boolean {
    const match =
      /^\[(\d+):0x[0-9a-f]+\]\s+[\d.]+ ms: pause=([\d.]+) .* allocated=(\d+) promoted=(\d+) /.exec(line);
    if (match === null) return false;
    const pid = Number(match[1]);
    const collection = { allocated: Number(match[3]), promoted: Number(match[4]), pauseMs: Number(match[2]) };
    this.totals.set(pid, addCollections(this.totals.get(pid) ?? NO_COLLECTIONS, collection));
    return true;
  }

  /** A stream of whole lines (a platform's `output`) that counts the collections' and drops the rest. */
  sink(): NodeJS.WritableStream {
    let partial = '';
    return new Writable({
      write: (chunk: Buffer | string, _encoding, done) => {
        const lines = (partial + chunk.toString()).split('\n');
        partial = lines.pop()!;
        for (const line of lines) this.read(line);
        done();
      },
    });
  }

  /** What the collections of the processes `pids` told since each started. */
  of(pids: readonly number[]): Collections {
    return pids.reduce<Collections>(
      (sum, pid) => addCollections(sum, this.totals.get(pid) ?? NO_COLLECTIONS),
      NO_COLLECTIONS,
    );
  }
}
