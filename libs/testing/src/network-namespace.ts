import { execFile, spawn } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import type { Socket } from 'node:net';
import { promisify } from 'node:util';

/** Where a process of a test runs: the address it listens on and what its command is run under. */
export interface NetworkPlace {
  /** The IPv4 address its listeners bind and advertise. */
  readonly address: string;
  /** Put before its command (`ip netns exec <name>`); empty in the test's own namespace. */
  readonly prefix: readonly string[];
}

/**
 * A host of its own for a test: a network namespace joined to the test's namespace by a veth pair, on
 * a /30 of 10.201.0.0/16 picked at random. `inside` is the namespace (its end of the pair, a default
 * route through the other end); `outside` is the test's own namespace, at the other end's address,
 * which the namespace reaches and the test's processes have as a local address. Traffic between them
 * goes through the pair, where the faults apply, in both directions.
 *
 * Faults with what this machine's kernel has (a Firecracker kernel without modules: no netem, no tc
 * filters or actions; tbf and pfifo are built in): {@link slow} is a token bucket on the link, which
 * delays what exceeds its rate and drops what would wait longer than its latency bound (congestion:
 * latency and loss under load); {@link partition} is a queue of length 0 at both ends, which drops
 * every packet silently (no RST, no ICMP: a cut cable); {@link heal} takes either away.
 */
export interface IsolatedHost {
  readonly name: string;
  readonly inside: NetworkPlace;
  readonly outside: NetworkPlace;
  /** Both directions limited to `rateKbit`; packets that would wait more than `latencyMs` are dropped. */
  slow(options: { rateKbit: number; latencyMs: number }): Promise<void>;
  /** Every packet either way dropped. */
  partition(): Promise<void>;
  /** The link as it was made. */
  heal(): Promise<void>;
  /** Deletes the namespace and the pair (idempotent). */
  remove(): Promise<void>;
}

const ip = (...args: string[]) => command('ip', args);

/**
 * Why this process cannot make an {@link IsolatedHost}, or undefined if it can: it makes a namespace
 * and deletes it again, and asks for `tc`. For tests that skip, with this reason, where network
 * namespaces are not permitted (not root, no iproute2, a container without CAP_NET_ADMIN).
 */
export async function networkNamespacesUnavailable(): Promise<string | undefined> {
  const name = `ofp-probe-${randomBytes(3).toString('hex')}`;
  try {
    await ip('netns', 'add', name);
    await ip('netns', 'del', name);
    await command('tc', ['qdisc', 'show']);
    return undefined;
  } catch (error) {
    await ip('netns', 'del', name).catch(() => {});
    return (error as Error).message;
  }
}

/**
 * Makes an {@link IsolatedHost}. Needs root and iproute2; where either is missing it fails with the
 * reason (a test that needs network faults must not pass without them). The namespace and the pair are
 * deleted by {@link IsolatedHost.remove}, and should the test's process die first (even by SIGKILL),
 * by a janitor shell that waits for end-of-file on a pipe only this process writes to.
 */
export async function isolatedHost(): Promise<IsolatedHost> {
  const id = randomBytes(3).toString('hex');
  const name = `ofp-${id}`;
  // Interface names are at most 15 characters.
  const [outer, inner] = [`ofp${id}o`, `ofp${id}i`];
  const taken = await ip('-o', '-4', 'addr', 'show');
  let block: number;
  do block = randomInt(0, 16_384);
  while (taken.includes(`10.201.${block >> 6}.${(block & 63) * 4 + 1}/`));
  const base = `10.201.${block >> 6}.${(block & 63) * 4}`.split('.').map(Number);
  const at = (offset: number) => [...base.slice(0, 3), base[3]! + offset].join('.');
  const [outsideAddress, insideAddress] = [at(1), at(2)];

  const janitor = spawn(
    'sh',
    ['-c', 'while read -r _; do :; done; ip netns del "$1"; ip link del "$2"', 'netns-janitor', name, outer],
    { detached: true, stdio: ['pipe', 'ignore', 'ignore'] },
  );
  janitor.unref();
  (janitor.stdin as Socket).unref();
  janitor.stdin.on('error', () => {});
  let removed: Promise<void> | undefined;
  const remove = () =>
    (removed ??= (async () => {
      await ip('netns', 'del', name).catch(() => {});
      await ip('link', 'del', outer).catch(() => {});
      janitor.stdin.end();
    })());

  const inNamespace = (...args: string[]) => ip('-n', name, ...args);
  try {
    await ip('netns', 'add', name);
    await ip('link', 'add', outer, 'type', 'veth', 'peer', 'name', inner);
    await ip('link', 'set', inner, 'netns', name);
    await ip('addr', 'add', `${outsideAddress}/30`, 'dev', outer);
    await ip('link', 'set', outer, 'up');
    await inNamespace('addr', 'add', `${insideAddress}/30`, 'dev', inner);
    await inNamespace('link', 'set', inner, 'up');
    await inNamespace('link', 'set', 'lo', 'up');
    await inNamespace('route', 'add', 'default', 'via', outsideAddress);
  } catch (error) {
    await remove();
    throw error;
  }

  const bothEnds = async (qdisc: string[] | undefined) => {
    for (const [device, run] of [
      [outer, (args: string[]) => command('tc', args)],
      [inner, (args: string[]) => command('ip', ['netns', 'exec', name, 'tc', ...args])],
    ] as const) {
      if (qdisc) await run(['qdisc', 'replace', 'dev', device, 'root', ...qdisc]);
      else await run(['qdisc', 'del', 'dev', device, 'root']).catch(() => {});
    }
  };
  return {
    name,
    inside: { address: insideAddress, prefix: ['ip', 'netns', 'exec', name] },
    outside: { address: outsideAddress, prefix: [] },
    slow: ({ rateKbit, latencyMs }) =>
      bothEnds(['tbf', 'rate', `${rateKbit}kbit`, 'burst', '16kbit', 'latency', `${latencyMs}ms`]),
    partition: () => bothEnds(['pfifo', 'limit', '0']),
    heal: () => bothEnds(undefined),
    remove,
  };
}

async function command(file: string, args: string[]): Promise<string> {
  try {
    return (await promisify(execFile)(file, args)).stdout;
  } catch (error) {
    const { code, stderr = '' } = error as NodeJS.ErrnoException & { stderr?: string };
    const reason =
      code === 'ENOENT'
        ? `${file} is not on the PATH (iproute2)`
        : `${file} ${args.join(' ')} failed: ${stderr.trim() || (error as Error).message}`;
    throw new Error(`network namespaces for fault tests need root and iproute2: ${reason}`, { cause: error });
  }
}
