import pg from 'pg';
import { Gauge, type Registry } from 'prom-client';
import type { Module } from './lifecycle.js';
import type { Logger } from './logger.js';
import { describeDatabase, describeError } from './preflight.js';

/** Something a process cannot work without, asked whether it answers now. */
export interface DependencyCheck {
  /** What it is, as a person reads it in a log line (`Postgres user@host:5432/db`). */
  readonly name: string;
  /** What kind of dependency it is, as the `dependency` label of `dependency_up` (`postgres`, `kafka`). */
  readonly kind: string;
  /** Resolves when the dependency answers; rejects with the reason when it does not. */
  check(): Promise<void>;
  /** Releases what the check keeps open. */
  close(): Promise<void>;
  /**
   * Whether it is known to be down without asking (the embedded Postgres's watchdog saw the
   * postmaster exit): not ready at once, rather than at the next check.
   */
  knownDown?(): boolean;
}

export interface DependencyHealthOptions {
  readonly checks: readonly DependencyCheck[];
  readonly logger: Logger;
  /** How often each dependency is asked (default 1 s). */
  readonly intervalMs?: number;
  /** How long an answer may take before the dependency counts as down (default 2 s). */
  readonly timeoutMs?: number;
  /** Where `dependency_up{dependency}` goes: 1 while the dependency answers its checks, else 0. */
  readonly metrics?: Registry;
}

/**
 * Readiness that tells the truth (API.md §3: 503 while a dependency is down): a module whose
 * `ready()` is false while any of its dependencies did not answer its last check, and true again once
 * it answers. Each check runs every `intervalMs` on a connection of its own, so a busy pool never
 * passes for a lost database. The first check happens at start; a change either way is logged once,
 * and `dependency_up` tells it to Prometheus (the chart alerts on a database nobody reaches).
 */
export function createDependencyHealth(options: DependencyHealthOptions): Module {
  const intervalMs = options.intervalMs ?? 1_000;
  const timeoutMs = options.timeoutMs ?? 2_000;
  const down = new Map<string, string>();
  let timer: NodeJS.Timeout | undefined;
  let round: Promise<void> | undefined;
  let started = false;

  const checkOne = async (dependency: DependencyCheck): Promise<void> => {
    let failure: string | undefined;
    try {
      await withTimeout(dependency.check(), timeoutMs);
    } catch (error) {
      failure = describeError(error);
    }
    const before = down.get(dependency.name);
    if (failure === undefined) {
      if (before !== undefined) {
        down.delete(dependency.name);
        options.logger.info({ dependency: dependency.name }, `${dependency.name} answers again`);
      }
    } else if (before === undefined) {
      down.set(dependency.name, failure);
      options.logger.error(
        { dependency: dependency.name, reason: failure },
        `${dependency.name} does not answer (${failure}); not ready until it does`,
      );
    }
  };
  const isUp = (dependency: DependencyCheck): boolean =>
    started && !down.has(dependency.name) && dependency.knownDown?.() !== true;
  if (options.metrics) {
    new Gauge({
      name: 'dependency_up',
      help: 'Whether a dependency of the process (postgres, kafka) answered its last readiness check (1) or not (0)',
      labelNames: ['dependency'],
      registers: [options.metrics],
      collect() {
        for (const dependency of options.checks)
          this.set({ dependency: dependency.kind }, isUp(dependency) ? 1 : 0);
      },
    });
  }
  const checkAll = (): Promise<void> =>
    (round ??= Promise.all(options.checks.map(checkOne)).then(() => {
      round = undefined;
    }));

  return {
    name: 'dependency-health',
    async start() {
      await checkAll();
      timer = setInterval(() => void checkAll(), intervalMs);
      timer.unref();
      started = true;
    },
    async stop() {
      started = false;
      clearInterval(timer);
      await round;
      await Promise.all(options.checks.map((dependency) => dependency.close()));
    },
    ready: () => started && options.checks.every(isUp),
  };
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * `SELECT 1` on a connection of its own, opened again after it was lost (a pool's connections are
 * busy with work, and may all be taken when the database is fine).
 */
export function postgresCheck(
  connectionString: string,
  options: { knownDown?: () => boolean } = {},
): DependencyCheck {
  let client: pg.Client | undefined;
  const drop = (): void => {
    const lost = client;
    client = undefined;
    void lost?.end().catch(() => {});
  };
  return {
    name: `Postgres ${describeDatabase(connectionString)}`,
    kind: 'postgres',
    async check() {
      try {
        if (!client) {
          const fresh = new pg.Client({
            connectionString,
            application_name: 'health',
            connectionTimeoutMillis: 2_000,
            query_timeout: 2_000,
          });
          fresh.on('error', () => {
            if (client === fresh) drop();
          });
          client = fresh;
          await fresh.connect();
        }
        await client.query('SELECT 1');
      } catch (error) {
        drop();
        throw error;
      }
    },
    async close() {
      const open = client;
      client = undefined;
      await open?.end().catch(() => {});
    },
    ...(options.knownDown ? { knownDown: options.knownDown } : {}),
  };
}
