// Shared measurement for the benchmarks: a closed loop of `concurrency` workers, latency per operation.
import { performance } from 'node:perf_hooks';

export interface Measurement {
  readonly operations: number;
  readonly seconds: number;
  readonly perSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
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
  const seconds = (performance.now() - started) / 1000;
  const sorted = [...latencies].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  return { operations: count, seconds, perSecond: count / seconds, p50Ms: at(0.5), p99Ms: at(0.99) };
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

/** One table row: the measured system next to its raw baseline, and the throughput ratio. */
export function formatRow(name: string, system: Measurement, raw: Measurement, rawLabel = 'raw'): string {
  const ratio = (100 * system.perSecond) / raw.perSecond;
  const cell = (m: Measurement): string =>
    `${m.perSecond.toFixed(0).padStart(7)}/s  p50 ${m.p50Ms.toFixed(2).padStart(6)} ms  p99 ${m.p99Ms.toFixed(2).padStart(6)} ms`;
  return `${name.padEnd(26)} ${cell(system)}   | ${rawLabel} ${cell(raw)}   | ${ratio.toFixed(0).padStart(3)}%`;
}
