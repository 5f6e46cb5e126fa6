import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Toxiproxy, type Proxy, type Toxic } from 'toxiproxy-node-client';
import { DIE_WITH_PARENT } from './platform-processes.js';
import { freePort } from './ports.js';

/** Shopify's Toxiproxy, the newest version the Go module proxy serves. */
export const TOXIPROXY_VERSION = 'v2.5.0';

/**
 * A TCP service that each client reaches through a link of its own, a Toxiproxy proxy, so that the
 * link of one client or of all can be slowed, reset or cut while the service runs on. A link may also
 * be one server of several (a Kafka broker), every client reaching that server through it. The faults of a
 * network that this machine's kernel cannot make with `tc netem` (no modules: no netem, no tc filters).
 */
export interface ProxiedService {
  /** The address (`127.0.0.1:port`) that the link `name` listens at; made once per name. */
  addressFor(name: string): Promise<string>;
  /** Every link's answers delayed by `latencyMs` ± `jitterMs`, new links included, until {@link heal}. */
  slow(options: { latencyMs: number; jitterMs: number }): Promise<void>;
  /**
   * A `toxicity` share of the links (drawn per connection, from the server's seed) reset by the
   * peer `afterMs` after their next bytes, new links included, until {@link heal}: the connections
   * that a lossy network kills.
   */
  reset(options: { afterMs: number; toxicity: number }): Promise<void>;
  /**
   * The links of client `name` cut both ways until {@link heal}: whatever is sent is dropped, and
   * nothing is refused or reset (new connections are accepted and hang), as a partition between that
   * client and the service while every other client reaches it. The links cut are closed at the
   * heal (Toxiproxy's timeout toxic), as a partition longer than TCP's patience ends them.
   */
  cut(name: string): Promise<void>;
  /** Every toxic taken away. */
  heal(): Promise<void>;
  /** Stops the server (its proxies with it). */
  stop(): Promise<void>;
}

/**
 * Starts a Toxiproxy server on a free loopback port, each link `name` in front of `upstream(name)`
 * (`host:port`, asked when the link is made), built the
 * first time with `go install` into `<cacheDir>/toxiproxy-<version>` (about 30 s; the Go module
 * proxy, no other download). `seed` seeds its random draws (toxicity, jitter), so that a chaos run's
 * seed replays them as well as the platform's scheduling lets it. The server dies with this process.
 */
export async function startToxiproxy(options: {
  cacheDir: string;
  upstream: (name: string) => string;
  seed: number;
  log?: (line: string) => void;
}): Promise<ProxiedService> {
  const server = await toxiproxyServer(options.cacheDir, options.log);
  const port = await freePort();
  const [command, ...args] = [
    ...DIE_WITH_PARENT,
    server,
    ...['-host', '127.0.0.1', '-port', String(port), '-seed', String(options.seed)],
  ];
  const child = spawn(command!, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let output = '';
  child.stderr.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-2_000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const client = new Toxiproxy(`http://127.0.0.1:${port}`);
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`Toxiproxy exited at start: ${output}`);
    try {
      await client.getVersion();
      break;
    } catch (error) {
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`Toxiproxy did not answer within 10 s: ${output}`, { cause: error });
      }
      await sleep(50);
    }
  }

  const proxies = new Map<string, Promise<Proxy>>();
  const toxics: Toxic<unknown>[] = [];
  const everyProxy = async (): Promise<Proxy[]> => Promise.all(proxies.values());
  const add = async (
    proxy: Proxy,
    toxic: { type: Toxic<unknown>['type']; attributes: unknown; toxicity?: number },
  ) => {
    for (const stream of ['upstream', 'downstream'] as const)
      toxics.push(
        await proxy.addToxic({
          name: `${toxic.type}-${stream}`,
          type: toxic.type,
          stream,
          toxicity: toxic.toxicity ?? 1,
          attributes: toxic.attributes,
        }),
      );
  };
  return {
    addressFor(name) {
      let proxy = proxies.get(name);
      if (!proxy) {
        proxy = freePort().then((listen) =>
          client.createProxy({ name, listen: `127.0.0.1:${listen}`, upstream: options.upstream(name) }),
        );
        proxies.set(name, proxy);
      }
      return proxy.then((made) => made.listen);
    },
    async slow({ latencyMs, jitterMs }) {
      // Downstream only: a request's answer comes `latencyMs` later, one round trip per statement.
      for (const proxy of await everyProxy())
        toxics.push(
          await proxy.addToxic({
            name: 'latency-downstream',
            type: 'latency',
            stream: 'downstream',
            toxicity: 1,
            attributes: { latency: latencyMs, jitter: jitterMs },
          }),
        );
    },
    async reset({ afterMs, toxicity }) {
      for (const proxy of await everyProxy())
        await add(proxy, { type: 'reset_peer', attributes: { timeout: afterMs }, toxicity });
    },
    async cut(name) {
      const proxy = proxies.get(name);
      if (!proxy) throw new Error(`no link of ${name} to cut`);
      await add(await proxy, { type: 'timeout', attributes: { timeout: 0 } });
    },
    async heal() {
      for (const toxic of toxics.splice(0)) await toxic.remove();
    },
    async stop() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** The server's binary, built with `go install` into the cache the first time. */
async function toxiproxyServer(cacheDir: string, log?: (line: string) => void): Promise<string> {
  const dir = join(cacheDir, `toxiproxy-${TOXIPROXY_VERSION}`);
  const binary = join(dir, 'server');
  if (existsSync(binary)) return binary;
  log?.(`building Toxiproxy ${TOXIPROXY_VERSION} with go install into ${dir} (first run only, about 30 s)`);
  await mkdir(dir, { recursive: true });
  try {
    await promisify(execFile)(
      'go',
      [
        'install',
        '-trimpath',
        '-ldflags',
        '-s -w',
        `github.com/Shopify/toxiproxy/v2/cmd/server@${TOXIPROXY_VERSION}`,
      ],
      { env: { ...process.env, CGO_ENABLED: '0', GOBIN: dir } },
    );
  } catch (error) {
    const { code, stderr = '' } = error as NodeJS.ErrnoException & { stderr?: string };
    throw new Error(
      code === 'ENOENT'
        ? 'Toxiproxy is built with Go, and go is not on the PATH'
        : `building Toxiproxy failed: ${stderr.trim() || (error as Error).message}`,
      { cause: error },
    );
  }
  return binary;
}
