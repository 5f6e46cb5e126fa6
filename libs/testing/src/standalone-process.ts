import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { environmentWithoutSettings } from './platform-processes.js';
import { freePort } from './ports.js';

/** The repository's root: where `npm start` runs. */
export const REPOSITORY_ROOT = fileURLToPath(new URL('../../..', import.meta.url));

export interface StandaloneOptions {
  /** What to run: `node platform/dist/main.js` of `cwd` by default, `['npm', 'start']` for the quick start. */
  readonly command?: readonly string[];
  /** Where it runs (the default DATA_DIR, ./.data, is relative to it); the repository by default. */
  readonly cwd?: string;
  /** Settings; PORT and EMBEDDED_POSTGRES_PORT default to free ports. Nothing of the test run's own is passed. */
  readonly env?: Readonly<Record<string, string>>;
}

export interface StandaloneProcess {
  readonly child: ChildProcess;
  /** Where it listens (`http://127.0.0.1:<PORT>`). */
  readonly url: string;
  readonly env: Readonly<Record<string, string>>;
  /** What it printed so far. */
  output(): { stdout: string; stderr: string };
  /** Resolves with its exit code once it has exited. */
  readonly exited: Promise<number | null>;
  /** SIGTERM to its process group (npm and what it runs), then its exit code (SIGKILL after 30 s). */
  stop(): Promise<number | null>;
}

/**
 * Runs the platform standalone, on its own embedded Postgres, as a person does: a process of its own
 * (a process group, so that `npm start` and the node it runs stop together), output captured.
 */
export async function spawnStandalone(options: StandaloneOptions = {}): Promise<StandaloneProcess> {
  const cwd = options.cwd ?? REPOSITORY_ROOT;
  const env: Record<string, string> = {
    PORT: String(await freePort()),
    EMBEDDED_POSTGRES_PORT: String(await freePort()),
    ...options.env,
  };
  const [command, ...args] = options.command ?? [process.execPath, 'platform/dist/main.js'];
  const child = spawn(command!, args, {
    cwd,
    env: { ...environmentWithoutSettings(), LOG_LEVEL: 'info', ...env },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    child,
    url: `http://127.0.0.1:${env.PORT}`,
    env,
    output: () => ({ stdout, stderr }),
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        process.kill(-child.pid!, 'SIGTERM');
        const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 30_000);
        await exited;
        clearTimeout(timer);
      }
      return exited;
    },
  };
}

/** A standalone process once `/readyz` answers 200; its output is in the error if it exits first. */
export async function startStandalone(options: StandaloneOptions = {}): Promise<StandaloneProcess> {
  const started = await spawnStandalone(options);
  try {
    await waitUntil(started.url, 200, started, 120_000);
  } catch (error) {
    await started.stop();
    const { stdout, stderr } = started.output();
    throw new Error(`${(error as Error).message}\nstdout:\n${stdout}\nstderr:\n${stderr}`, { cause: error });
  }
  return started;
}

/** Waits until `/readyz` answers `status` (or, for 503, stops answering 200); throws if the process exits. */
export async function waitUntil(
  url: string,
  status: 200 | 503,
  running: Pick<StandaloneProcess, 'child'> | undefined,
  timeoutMs: number,
): Promise<number> {
  const begun = Date.now();
  for (;;) {
    if (running && running.child.exitCode !== null) {
      throw new Error(
        `the platform exited (code ${running.child.exitCode}) before /readyz answered ${status}`,
      );
    }
    const answered = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2_000) }).then(
      (response) => response.status,
      () => undefined,
    );
    if (answered === status) return Date.now() - begun;
    if (Date.now() - begun > timeoutMs) {
      throw new Error(`${url}/readyz did not answer ${status} within ${timeoutMs} ms (last: ${answered})`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Runs the platform (or a tool) to its end: exit code and output. */
export async function runToExit(
  options: StandaloneOptions & { timeoutMs?: number },
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const running = await spawnStandalone(options);
  const timer = setTimeout(() => void running.stop(), options.timeoutMs ?? 120_000);
  const code = await running.exited;
  clearTimeout(timer);
  return { code, ...running.output() };
}

/**
 * Runs a command as a person would in a shell (a command-line tool, `npm run ...`): with `env` over
 * an environment without the test run's platform settings, to its end.
 */
export async function runCommand(
  command: readonly string[],
  options: { cwd?: string; env?: Readonly<Record<string, string>>; timeoutMs?: number } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const [program, ...args] = command;
  const child = spawn(program!, args, {
    cwd: options.cwd ?? REPOSITORY_ROOT,
    env: { ...environmentWithoutSettings(), ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 120_000);
  const code = await new Promise<number | null>((resolve) => child.once('close', (exit) => resolve(exit)));
  clearTimeout(timer);
  return { code, stdout, stderr };
}

/**
 * Lays the repository's installed and built working tree out again at `to`, as a clone there would be
 * after `npm ci && npm run build` (git, caches and data left out). Files are hard links (no copy of
 * the 300 MB of node_modules; a build there finds everything up to date and writes nothing), or
 * copies where `to` lies on another file system.
 */
export async function copyWorkspace(to: string): Promise<void> {
  await mkdir(to, { recursive: true });
  const run = promisify(execFile);
  for (const entry of await readdir(REPOSITORY_ROOT)) {
    if (['.git', '.cache', '.data'].includes(entry)) continue;
    const from = join(REPOSITORY_ROOT, entry);
    await run('cp', ['-al', from, to]).catch(() => run('cp', ['-a', from, to]));
  }
}
