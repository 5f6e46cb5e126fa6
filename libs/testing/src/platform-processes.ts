import { fileURLToPath } from 'node:url';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { createTestDatabase, type TestDatabase } from './postgres.js';
import { startLoadBalancer, type LoadBalancer } from './load-balancer.js';
import { freePort } from './ports.js';
import { testSecretsKeyFile } from './secrets.js';

/** The compiled process entry point (`npm test` builds before running the tiers that use it). */
const PLATFORM_MAIN = fileURLToPath(new URL('../../../platform/dist/main.js', import.meta.url));
const OUTPUT_TAIL_LINES = 30;
/**
 * What a platform process's command runs under so that it never outlives the process that started it:
 * util-linux's `setpriv` has the kernel send it SIGKILL when its parent dies (PR_SET_PDEATHSIG), also
 * when the parent dies of SIGKILL or a crash and none of its cleanup runs (a chaos run that died left
 * its eight platform processes running). SIGKILL, because a paused replica does not act on another
 * signal. Elsewhere (no setpriv: macOS), nothing; the process's stop() is then the only way.
 */
export const DIE_WITH_PARENT: readonly string[] = existsSync('/usr/bin/setpriv')
  ? ['/usr/bin/setpriv', '--pdeathsig', 'SIGKILL', '--']
  : [];

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
  /** Every process's own base URL by its name ({@link PlatformProcess.name}; `all` standalone). */
  readonly processes: Readonly<Record<string, string>>;
  /** Every process's id by its name, as started (benchmarks read their CPU time from `/proc`). */
  readonly pids: Readonly<Record<string, number>>;
  /** Every process, to signal, kill and restart one (the chaos run). */
  readonly members: readonly PlatformProcess[];
  /** Sends SIGTERM to every process and waits for them to exit (SIGKILL after 15 s). */
  stop(): Promise<void>;
}

/** One process of the platform. */
export interface PlatformProcess {
  /** Its TARGET, with the replica's number after the first: `api`, `api-2`. */
  readonly name: string;
  readonly target: string;
  /** Its own base URL (not the load balancer's). */
  readonly url: string;
  /** The id of the process while it runs. */
  pid(): number | undefined;
  running(): boolean;
  /** Sends a signal: SIGKILL, SIGSTOP, SIGCONT... */
  signal(name: NodeJS.Signals): void;
  /** Resolves once the current process has exited. */
  exited(): Promise<void>;
  /** Starts it again, on the same port with the same settings, once it has exited; resolves when ready. */
  restart(): Promise<void>;
  /** How it ended, and the last lines it wrote. */
  describeExit(): string;
}

/**
 * Environment that takes the per-client rate limit (API.md §3, 429) out of the way, for runs whose one
 * client sends more than 100 requests a second on purpose: benchmarks, fuzzing, property tests.
 */
export const UNLIMITED_RATE: Readonly<Record<string, string>> = {
  RATE_LIMIT_CAPACITY: '1000000000',
  RATE_LIMIT_REFILL_PER_SECOND: '1000000000',
};

export type PlatformOutput = 'inherit' | 'ignore' | NodeJS.WritableStream;

export interface PlatformOptions {
  readonly databaseUrl: string;
  /** With brokers: the distributed shape, one process per service. Without: standalone, one process. */
  readonly kafkaBrokers?: readonly string[];
  /**
   * Distributed: processes of every service (default 1). With more than one, each service's URL is a
   * round-robin load balancer in front of them ({@link startLoadBalancer}), as a Kubernetes Service is.
   */
  readonly replicas?: number;
  /** Extra environment for every process (LOG_LEVEL, KAFKA_TOPIC_PREFIX...). */
  readonly env?: Readonly<Record<string, string>>;
  /**
   * Environment of one process by its {@link PlatformProcess.name}, over `env`: a DATABASE_URL of its
   * own (the chaos run's link to Postgres through a proxy that can cut this process alone off).
   */
  readonly envFor?: (name: string) => Promise<Readonly<Record<string, string>>>;
  /**
   * Where the processes' output goes: this process's stdout and stderr, nowhere, or one stream (a log
   * file). Default: nowhere unless TEST_LOG_LEVEL is set.
   */
  readonly output?: PlatformOutput;
  /** Options of the node runtime for every process (`--cpu-prof`, which NODE_OPTIONS may not carry). */
  readonly nodeOptions?: readonly string[];
}

/**
 * Runs the platform as real processes over real HTTP: standalone (`TARGET=all`) or distributed
 * (`TARGET=auth`, `api`, `projector`, `webhook-dispatcher` against Kafka, each `replicas` times). For
 * end-to-end tests, benchmarks, the local distributed run and the chaos run.
 */
export async function startPlatform(options: PlatformOptions): Promise<RunningPlatform> {
  const adminToken = randomBytes(24).toString('base64url');
  const output = options.output ?? (process.env.TEST_LOG_LEVEL ? 'inherit' : 'ignore');
  const common: Record<string, string> = {
    DATABASE_URL: options.databaseUrl,
    ADMIN_TOKEN: adminToken,
    SECRETS_KEY_FILE: testSecretsKeyFile(),
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
    ...options.env,
  };
  const members: ManagedProcess[] = [];
  const balancers: LoadBalancer[] = [];
  const nodeOptions = options.nodeOptions ?? [];
  /** Standalone: a DATA_DIR of its own, removed at the stop ({@link startPlatform}). */
  let dataDir: string | undefined;
  const stop = async (): Promise<void> => {
    await Promise.all(balancers.map((balancer) => balancer.close()));
    await Promise.all(members.map((member) => member.stop()));
    if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
  };
  /** Starts the processes and resolves once all of them are ready. */
  const launch = async (
    processes: readonly { name: string; target: string; port: number; env: Record<string, string> }[],
  ): Promise<void> => {
    const launched = await Promise.all(
      processes.map(
        async ({ name, target, port, env }) =>
          new ManagedProcess(
            name,
            target,
            port,
            { ...env, ...(await options.envFor?.(name)) },
            output,
            nodeOptions,
          ),
      ),
    );
    members.push(...launched);
    for (const member of launched) member.start();
    await Promise.all(launched.map((member) => waitReady(member.url, members)));
  };
  /** One address for processes: the process's own, or a load balancer's in front of several. */
  const serve = async (ports: readonly number[]): Promise<string> => {
    if (ports.length === 1) return `http://localhost:${ports[0]}`;
    const balancer = await startLoadBalancer(ports.map((port) => `http://localhost:${port}`));
    balancers.push(balancer);
    return balancer.url;
  };
  const running = (
    urls: Pick<RunningPlatform, 'authUrl' | 'adminUrl' | 'apiUrl' | 'webhooksUrl'>,
  ): RunningPlatform => ({
    ...urls,
    adminToken,
    processes: Object.fromEntries(members.map((member) => [member.name, member.url])),
    pids: Object.fromEntries(
      members.flatMap((member) => {
        const pid = member.pid();
        return pid === undefined ? [] : [[member.name, pid]];
      }),
    ),
    members,
    stop,
  });
  try {
    if (!options.kafkaBrokers) {
      const port = await freePort();
      // Its instance lock and files in a folder of its own, not the repository's ./.data: jest runs two
      // test files at a time, and a second standalone process on one DATA_DIR refuses to start.
      dataDir = await mkdtemp(join(tmpdir(), 'ofp-standalone-'));
      await launch([{ name: 'all', target: 'all', port, env: { DATA_DIR: dataDir, ...common } }]);
      const url = `http://localhost:${port}`;
      return running({ authUrl: url, adminUrl: url, apiUrl: url, webhooksUrl: url });
    }
    const replicas = Array.from({ length: options.replicas ?? 1 }, (_, i) => i);
    const name = (target: string, replica: number): string =>
      replica === 0 ? target : `${target}-${replica + 1}`;
    const ports = async (): Promise<number[]> => Promise.all(replicas.map(() => freePort()));
    const [authPorts, adminPorts] = [await ports(), await ports()];
    const authUrl = await serve(authPorts);
    const distributed = {
      ...common,
      KAFKA_BROKERS: options.kafkaBrokers.join(','),
      PUBLIC_URL: authUrl,
      AUTH_URL: authUrl,
    };
    const services = await Promise.all(
      (['api', 'projector', 'webhook-dispatcher'] as const).map(async (target) => {
        const servicePorts = await ports();
        return { target, ports: servicePorts, url: await serve(servicePorts) };
      }),
    );
    // All at once, as a Kubernetes rollout starts them: the services that verify tokens are ready once
    // they have auth's keys, which their warm-up fetches again until auth answers (platform/src/warm-up.ts).
    await launch([
      ...replicas.map((replica) => ({
        name: name('auth', replica),
        target: 'auth',
        port: authPorts[replica]!,
        env: { ...distributed, ADMIN_PORT: String(adminPorts[replica]) },
      })),
      ...services.flatMap(({ target, ports: servicePorts }) =>
        replicas.map((replica) => ({
          name: name(target, replica),
          target,
          port: servicePorts[replica]!,
          env: distributed,
        })),
      ),
    ]);
    const [api, , webhooks] = services;
    return running({
      authUrl,
      adminUrl: await serve(adminPorts),
      apiUrl: api!.url,
      webhooksUrl: webhooks!.url,
    });
  } catch (error) {
    await stop();
    throw error;
  }
}

/** A platform process that can be signalled, and started again on its port after it exited. */
class ManagedProcess implements PlatformProcess {
  readonly url: string;
  private child: ChildProcess | undefined;
  private exit: Promise<void> = Promise.resolve();
  /** The last lines the process wrote, quoted when it exits before it is ready. */
  private readonly tail: string[] = [];

  constructor(
    readonly name: string,
    readonly target: string,
    private readonly port: number,
    private readonly env: Record<string, string>,
    private readonly output: PlatformOutput,
    private readonly nodeOptions: readonly string[],
  ) {
    this.url = `http://localhost:${port}`;
  }

  /** Spawns the process (not waiting for it to be ready). */
  start(): void {
    const [command, ...args] = [...DIE_WITH_PARENT, process.execPath, ...this.nodeOptions, PLATFORM_MAIN];
    const child = spawn(command, args, {
      env: { ...environmentWithoutSettings(), ...this.env, TARGET: this.target, PORT: String(this.port) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    for (const [stream, to] of [
      [child.stdout, process.stdout],
      [child.stderr, process.stderr],
    ] as const) {
      const sink = this.output === 'inherit' ? to : this.output === 'ignore' ? undefined : this.output;
      createInterface({ input: stream }).on('line', (line) => {
        // Whole lines, so that the processes sharing one stream do not cut into each other's lines.
        sink?.write(`${line}\n`);
        this.tail.push(line);
        if (this.tail.length > OUTPUT_TAIL_LINES) this.tail.shift();
      });
    }
    this.child = child;
    this.exit = new Promise((resolve) => child.once('exit', () => resolve()));
  }

  pid(): number | undefined {
    return this.running() ? this.child?.pid : undefined;
  }

  running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  signal(name: NodeJS.Signals): void {
    if (this.running()) this.child!.kill(name);
  }

  exited(): Promise<void> {
    return this.exit;
  }

  /** How it ended, and the last lines it wrote. */
  describeExit(): string {
    const how = this.child?.signalCode ?? `code ${this.child?.exitCode}`;
    return `${this.name} exited (${how}); its last lines:\n${this.tail.join('\n') || '(none)'}`;
  }

  async restart(): Promise<void> {
    await this.exit;
    this.start();
    await waitReady(this.url, [this]);
  }

  /** SIGTERM, SIGKILL after 15 s (a stopped process is continued first, so that it can exit). */
  async stop(): Promise<void> {
    if (!this.running()) return;
    this.child!.kill('SIGCONT');
    this.child!.kill('SIGTERM');
    const timer = setTimeout(() => this.child?.kill('SIGKILL'), 15_000);
    await this.exit;
    clearTimeout(timer);
  }
}

/** Settings of the test run that must not leak into a platform process (standalone means no Kafka). */
const PLATFORM_SETTINGS =
  /^(KAFKA_|DATABASE_URL$|ADMIN_TOKEN$|ADMIN_PORT$|PUBLIC_URL$|AUTH_URL$|DATA_DIR$|PORT$|TARGET$|EMBEDDED_POSTGRES_PORT$|LOG_FORMAT$|SECRETS_KEY_FILE$)/;

/** This process's environment without the test run's platform settings. */
export function environmentWithoutSettings(): Record<string, string> {
  return Object.fromEntries(
    Object.entries(process.env).filter(
      (entry): entry is [string, string] => entry[1] !== undefined && !PLATFORM_SETTINGS.test(entry[0]),
    ),
  );
}

async function waitReady(url: string, members: readonly ManagedProcess[], timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const exited = members.find((member) => !member.running());
    if (exited) throw new Error(`before ${url} was ready, platform process ${exited.describeExit()}`);
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

export type RunMode = 'standalone' | 'distributed';

/** Both ways to run, for `describe.each(RUN_MODES)('... ($mode)', ({ mode }) => ...)`. */
export const RUN_MODES: readonly { mode: RunMode }[] = [{ mode: 'standalone' }, { mode: 'distributed' }];

/** A platform on a test database of its own, which a test may read and write beside it. */
export interface TestPlatform extends RunningPlatform {
  readonly database: TestDatabase;
}

/**
 * The platform in `mode` on a test database of its own; distributed on the test run's Kafka broker
 * with topics of its own. `stop` also drops the database.
 */
export async function startTestPlatform(
  mode: RunMode,
  env: Readonly<Record<string, string>> = {},
): Promise<TestPlatform> {
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
      database,
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
