// Lean baselines: the same work as the platform's, done by the least code that can do it, in a process of
// its own (a `node:http` + `pg` server, a minimal Postgres queue worker), run on the same data in the same
// run and driven by the same load generator. The platform's CPU per unit of work against the lean
// process's then measures the platform's code; a baseline run inside the load generator (raw pg) would
// measure the load generator's client as well, and does, so it stays only as a second line.
//
// A lean process is a module of `bench/lean/`. It reads its settings with `leanSetting`, and either
// serves HTTP with `serveLean` or, when it serves nothing (a worker), calls `leanReady` once it works;
// `startLean` spawns it and resolves once it said so. Its CPU is accounted like the platform's
// (`LeanProcess.cpu`), and it exits with the benchmark (its stdin is a lifeline).
//
// To give a benchmark a lean baseline: write `bench/lean/<name>.ts` doing the same work with nothing
// else; start it with `startLean('<name>', settings)`; drive it with the same operation as the platform
// (`measureFor`/`maxAndHalfRate`, `withCpu` with `lean.cpu` in place of the platform's processes); print
// both sides' CPU per unit of work and their ratio.
import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { AllocationTrace, cpuProfileOptions, processes, type CpuParticipant } from './measure.js';

/** How long a lean process may take to say it is ready. */
const START_TIMEOUT_MS = 30_000;

export interface LeanProcess {
  /** `http://127.0.0.1:<port>` of a lean server; undefined for a worker that serves nothing. */
  readonly url: string | undefined;
  readonly pid: number;
  /** Its CPU time, accounted as `lean`. */
  readonly cpu: CpuParticipant;
  stop(): Promise<void>;
}

/**
 * Runs `bench/lean/<name>.ts` in a process of its own with `settings` in its environment (and
 * `--cpu-prof` with `BENCH_CPU_PROF_DIR`, as the platform), and resolves once it is ready. With
 * `allocations`, its collections are traced and counted there, as the platform's.
 */
export async function startLean(
  name: string,
  settings: Readonly<Record<string, string>>,
  allocations?: AllocationTrace,
): Promise<LeanProcess> {
  const entry = fileURLToPath(new URL(`./lean/${name}.ts`, import.meta.url));
  const traced = allocations === undefined ? [] : AllocationTrace.options;
  const child = spawn(process.execPath, [...cpuProfileOptions(), ...traced, '--import', 'tsx', entry], {
    env: { ...process.env, ...settings },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const lines = createInterface({ input: child.stdout });
  const first = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`lean ${name}: not ready within 30 s`)),
      START_TIMEOUT_MS,
    );
    const onLine = (line: string): void => {
      // A collection's line may come before the process says it is ready.
      if (allocations?.read(line) === true) return;
      lines.off('line', onLine);
      clearTimeout(timer);
      resolve(line);
    };
    lines.on('line', onLine);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`lean ${name} exited (${code}) before it was ready`));
    });
  });
  // Later lines (a worker's notes) pass through.
  lines.on('line', (line) => {
    if (allocations?.read(line) !== true) console.log(`lean ${name}: ${line}`);
  });
  return {
    url: first === 'ready' ? undefined : first,
    pid: child.pid!,
    cpu: processes('lean', [child.pid!]),
    async stop() {
      // Closing the lifeline lets it exit on its own, writing its CPU profile when one was asked for.
      child.stdin.end();
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** In a lean process: a setting the benchmark passed, or the process fails naming it. */
export function leanSetting(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`lean process: ${name} is not set`);
  return value;
}

/**
 * In a lean process: exits when the benchmark closes its stdin or exits itself, so that no lean
 * process outlives its run. Called by `serveLean` and `leanReady`.
 */
function holdLifeline(): void {
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('error', () => process.exit(0));
  process.stdin.resume();
}

/** In a lean worker: tells the benchmark it works. */
export function leanReady(): void {
  holdLifeline();
  process.stdout.write('ready\n');
}

/**
 * In a lean server: serves `handle` on a free loopback port (keep-alive as the platform's listener)
 * and tells the benchmark where. A handler that throws answers a bare 500 with the error's message.
 */
export function serveLean(handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>): void {
  const server = createServer({ maxHeaderSize: 64 * 1024 }, (req, res) => {
    handle(req, res).catch((error: unknown) => {
      res.statusCode = 500;
      res.end(String(error));
    });
  });
  server.keepAliveTimeout = 65_000;
  server.listen(0, '127.0.0.1', () => {
    holdLifeline();
    process.stdout.write(`http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
  });
}
