import { setTimeout as sleep } from 'node:timers/promises';
import type { JwksKeySource } from '@ofp/auth-tokens';
import type { Logger, Pool } from '@ofp/runtime';

/** How long a start waits at most for what it warms before it says ready anyway. */
export const WARM_UP_MS = 15_000;
/** Between two attempts at the issuer's keys. */
const KEYS_RETRY_MS = 250;

export interface WarmUpOptions {
  readonly pool: Pool;
  /** The pool's size: how many connections to open. */
  readonly connections: number;
  /** The token issuer's published keys, where the process verifies tokens. */
  readonly keys?: JwksKeySource | undefined;
  /** Where the keys come from, for the log. */
  readonly keysUrl?: string | undefined;
  readonly logger: Logger;
  readonly deadlineMs?: number;
}

/**
 * What the first requests after a start would otherwise wait for, made ready before `/readyz` says so
 * (as a module, it holds readiness until it has started): every connection of the pool open, and the
 * token issuer's keys fetched. Without it, a burst of requests right after a start (a rollout under
 * load) opened the pool's connections all at once and waited for the keys, and answered 503 when
 * those took longer than their deadlines. Bounded: past `deadlineMs` the process is ready without what
 * did not come (a Postgres that does not answer is the health check's to report; the keys are then
 * fetched by the first token, as before), and one line at `warn` says what is missing.
 */
export async function warmUp(options: WarmUpOptions): Promise<void> {
  const begun = performance.now();
  const deadline = begun + (options.deadlineMs ?? WARM_UP_MS);
  const [connections, keys] = await Promise.all([
    openConnections(options.pool, options.connections),
    options.keys ? fetchKeys(options.keys, deadline) : undefined,
  ]);
  const ms = Math.round(performance.now() - begun);
  const fields = {
    connections: connections.opened,
    ...(options.keys ? { keys: keys?.count, keys_url: options.keysUrl } : {}),
    ms,
  };
  const missing = [
    ...(connections.opened < options.connections
      ? [
          `${options.connections - connections.opened} of ${options.connections} database connections (${connections.error})`,
        ]
      : []),
    ...(keys && keys.count === undefined ? [`the token keys of ${options.keysUrl} (${keys.error})`] : []),
  ];
  if (missing.length === 0) {
    options.logger.info(
      fields,
      `warmed up in ${ms} ms: ${connections.opened} database connections open${options.keys ? `, ${keys?.count} token keys fetched` : ''}`,
    );
  } else {
    options.logger.warn(fields, `ready without ${missing.join(' and ')} after ${ms} ms of warming up`);
  }
}

/**
 * Opens `size` connections of the pool at once (each answers a statement), then gives them back; each
 * is bounded by the pool's connect timeout.
 */
async function openConnections(pool: Pool, size: number): Promise<{ opened: number; error?: string }> {
  const attempts = await Promise.allSettled(
    Array.from({ length: size }, async () => {
      const client = await pool.connect();
      try {
        await client.query('SELECT 1');
      } finally {
        client.release();
      }
    }),
  );
  const failures = attempts.filter((attempt) => attempt.status === 'rejected');
  return {
    opened: size - failures.length,
    ...(failures[0] ? { error: String((failures[0].reason as Error).message) } : {}),
  };
}

/** The issuer's keys, asked again until they come or `deadline` passes. */
async function fetchKeys(keys: JwksKeySource, deadline: number): Promise<{ count?: number; error?: string }> {
  let error = 'not asked';
  while (performance.now() < deadline) {
    const left = deadline - performance.now();
    try {
      const count = await Promise.race([
        keys.load(),
        sleep(left, undefined, { ref: false }).then(() => {
          throw new Error(`no answer within ${Math.round(left)} ms`);
        }),
      ]);
      return { count };
    } catch (failure) {
      error = (failure as Error).message;
    }
    await sleep(Math.min(KEYS_RETRY_MS, Math.max(0, deadline - performance.now())));
  }
  return { error };
}
