import { fileURLToPath } from 'node:url';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createTestDatabase } from './postgres.js';
import { freePort } from './ports.js';

/** The compiled process entry point (`npm test` builds before running the tiers that use it). */
const PLATFORM_MAIN = fileURLToPath(new URL('../../../platform/dist/main.js', import.meta.url));

export interface RunningPlatform {
  /** Base URL of the auth service (`/oauth`, `/.well-known`, `/v2/authenticate`). */
  readonly authUrl: string;
  /** Base URL of the admin API (`/admin`): the auth service's ADMIN_PORT distributed, the one port standalone. */
  readonly adminUrl: string;
  /** Base URL of the `/v2` model endpoints. */
  readonly apiUrl: string;
  /** Base URL of `/v2/webhooks*`, `/v2/webhook_deliveries*` and `/v2/webhook_event_types` (the webhook dispatcher). */
  readonly webhooksUrl: string;
  readonly adminToken: string;
  /** Every process's base URL by its TARGET (`all` standalone). */
  readonly processes: Readonly<Record<string, string>>;
  /** Every process's id by its TARGET (benchmarks read their CPU time from `/proc`). */
  readonly pids: Readonly<Record<string, number>>;
  /** Sends SIGTERM to every process and waits for them to exit (SIGKILL after 15 s). */
  stop(): Promise<void>;
}

export interface PlatformOptions {
  readonly databaseUrl: string;
  /** With brokers: the distributed shape, one process per service. Without: standalone, one process. */
  readonly kafkaBrokers?: readonly string[];
  /** Extra environment for every process (LOG_LEVEL, KAFKA_TOPIC_PREFIX...). */
  readonly env?: Readonly<Record<string, string>>;
  /** Where the processes' output goes (default: discarded unless TEST_LOG_LEVEL is set). */
  readonly output?: 'inherit' | 'ignore';
  /** Options of the node runtime for every process (`--cpu-prof`, which NODE_OPTIONS may not carry). */
  readonly nodeOptions?: readonly string[];
}

/**
 * Runs the platform as real processes over real HTTP: standalone (`TARGET=all`) or distributed
 * (`TARGET=auth`, `api`, `projector`, `webhook-dispatcher` against Kafka). For end-to-end tests, benchmarks and the local
 * distributed run.
 */
export async function startPlatform(options: PlatformOptions): Promise<RunningPlatform> {
  const adminToken = randomBytes(24).toString('base64url');
  const output = options.output ?? (process.env.TEST_LOG_LEVEL ? 'inherit' : 'ignore');
  const common: Record<string, string> = {
    DATABASE_URL: options.databaseUrl,
    ADMIN_TOKEN: adminToken,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
    ...options.env,
  };
  const children: ChildProcess[] = [];
  const pids: Record<string, number> = {};
  const launch = (target: string, port: number, env: Record<string, string>): void => {
    const child = spawnTarget(target, port, env, output, options.nodeOptions ?? []);
    children.push(child);
    if (child.pid !== undefined) pids[target] = child.pid;
  };
  const stop = async (): Promise<void> => {
    await Promise.all(children.map(stopProcess));
  };
  try {
    if (!options.kafkaBrokers) {
      const port = await freePort();
      launch('all', port, common);
      const url = `http://localhost:${port}`;
      await waitReady(url, children);
      return {
        authUrl: url,
        adminUrl: url,
        apiUrl: url,
        webhooksUrl: url,
        adminToken,
        processes: { all: url },
        pids,
        stop,
      };
    }
    const [authPort, adminPort, apiPort, projectorPort, webhooksPort] = [
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
    ];
    const authUrl = `http://localhost:${authPort}`;
    const distributed = {
      ...common,
      KAFKA_BROKERS: options.kafkaBrokers.join(','),
      PUBLIC_URL: authUrl,
      AUTH_URL: authUrl,
    };
    launch('auth', authPort, { ...distributed, ADMIN_PORT: String(adminPort) });
    await waitReady(authUrl, children);
    const urls = {
      api: `http://localhost:${apiPort}`,
      projector: `http://localhost:${projectorPort}`,
      webhooks: `http://localhost:${webhooksPort}`,
    };
    launch('api', apiPort, distributed);
    launch('projector', projectorPort, distributed);
    launch('webhook-dispatcher', webhooksPort, distributed);
    await Promise.all(Object.values(urls).map((url) => waitReady(url, children)));
    return {
      authUrl,
      adminUrl: `http://localhost:${adminPort}`,
      apiUrl: urls.api,
      webhooksUrl: urls.webhooks,
      adminToken,
      pids,
      processes: {
        auth: authUrl,
        api: urls.api,
        projector: urls.projector,
        'webhook-dispatcher': urls.webhooks,
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Settings of the test run that must not leak into a platform process (standalone means no Kafka). */
const PLATFORM_SETTINGS =
  /^(KAFKA_|DATABASE_URL$|ADMIN_TOKEN$|ADMIN_PORT$|PUBLIC_URL$|AUTH_URL$|DATA_DIR$|PORT$|TARGET$|EMBEDDED_POSTGRES_PORT$|LOG_FORMAT$)/;

/** This process's environment without the test run's platform settings. */
export function environmentWithoutSettings(): Record<string, string> {
  return Object.fromEntries(
    Object.entries(process.env).filter(
      (entry): entry is [string, string] => entry[1] !== undefined && !PLATFORM_SETTINGS.test(entry[0]),
    ),
  );
}

function spawnTarget(
  target: string,
  port: number,
  env: Record<string, string>,
  output: 'inherit' | 'ignore',
  nodeOptions: readonly string[],
): ChildProcess {
  return spawn(process.execPath, [...nodeOptions, PLATFORM_MAIN], {
    env: { ...environmentWithoutSettings(), ...env, TARGET: target, PORT: String(port) },
    stdio: ['ignore', output, output],
  });
}

async function waitReady(url: string, children: readonly ChildProcess[], timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const exited = children.find((child) => child.exitCode !== null);
    if (exited)
      throw new Error(`platform process exited with code ${exited.exitCode} before ${url} was ready`);
    try {
      const response = await fetch(`${url}/readyz`);
      if (response.ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} was not ready within ${timeoutMs} ms`);
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}

export type RunMode = 'standalone' | 'distributed';

/** Both ways to run, for `describe.each(RUN_MODES)('... ($mode)', ({ mode }) => ...)`. */
export const RUN_MODES: readonly { mode: RunMode }[] = [{ mode: 'standalone' }, { mode: 'distributed' }];

/**
 * The platform in `mode` on a test database of its own; distributed on the test run's Kafka broker
 * with topics of its own. `stop` also drops the database.
 */
export async function startTestPlatform(
  mode: RunMode,
  env: Readonly<Record<string, string>> = {},
): Promise<RunningPlatform> {
  const database = await createTestDatabase();
  try {
    const platform = await startPlatform(
      mode === 'standalone'
        ? { databaseUrl: database.url, env }
        : {
            databaseUrl: database.url,
            kafkaBrokers: (process.env.KAFKA_BROKERS ?? '').split(',').filter(Boolean),
            env: { KAFKA_TOPIC_PREFIX: `test.${randomBytes(4).toString('hex')}.`, ...env },
          },
    );
    return {
      ...platform,
      async stop() {
        await platform.stop();
        await database.drop();
      },
    };
  } catch (error) {
    await database.drop();
    throw error;
  }
}
