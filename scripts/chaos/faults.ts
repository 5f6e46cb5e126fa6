/**
 * The chaos run's faults (issue 18): a schedule drawn from the seed, carried out one fault at a time,
 * and the lag (outbox rows not yet on Kafka, plus events the consumer groups have not committed)
 * sampled throughout, to tell how long each fault took to recover from.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Admin, Consumer, Kafka } from '@ofp/bus';
import { uniformInt } from 'pure-rand/distribution/uniformInt';
import type { RandomGenerator } from 'pure-rand/types/RandomGenerator';
import type { Pool } from '@ofp/runtime';
import type { IsolatedHost, KafkaNode, PlatformProcess, ProxiedService } from '@ofp/testing';

export type FaultKind =
  | 'kill-replica'
  | 'pause-replica'
  | 'kill-broker'
  | 'pause-broker'
  | 'partition-broker'
  | 'restart-postgres'
  | 'slow-postgres'
  | 'reset-postgres'
  | 'cut-api-postgres'
  | 'slow-kafka'
  | 'reset-kafka';
/** The default schedule's kinds: signals and crashes. */
export const FAULT_KINDS: readonly FaultKind[] = [
  'kill-replica',
  'pause-replica',
  'kill-broker',
  'pause-broker',
  'restart-postgres',
];
/**
 * What `--faults network` adds (CI runs with it, as root; docs/chaos.md): a broker cut off the
 * network; on the platform's links to Postgres (each process through a Toxiproxy proxy of its own)
 * added latency, connections reset, and one api replica cut off while the others reach it; on the
 * platform's links to the brokers (a proxy per broker, which the broker advertises to the platform)
 * added latency and connections reset.
 */
export const NETWORK_FAULT_KINDS: readonly FaultKind[] = [
  'partition-broker',
  'slow-postgres',
  'reset-postgres',
  'cut-api-postgres',
  'slow-kafka',
  'reset-kafka',
];

export interface Fault {
  readonly kind: FaultKind;
  /** When it starts, from the start of the workload. */
  readonly atMs: number;
  /** A process's name, a broker's node id, `postgres`, or the links faulted. */
  readonly target: string;
  /** How long the target stays down or paused before it is brought back. */
  readonly holdMs: number;
  /** What a fault on the links to Postgres or the brokers does to them, drawn from the seed too. */
  readonly link?:
    | { readonly latencyMs: number; readonly jitterMs: number }
    | { readonly resetAfterMs: number; readonly toxicity: number };
}

/** What happened to a fault when it was carried out. */
export interface FaultOutcome extends Fault {
  /** When the target was back (restarted, resumed, answering). */
  restoredMs?: number;
  /** When the lag was first seen at zero after that. */
  recoveredMs?: number;
  /** The largest lag from the fault's start to its recovery. */
  maxLag: number;
  error?: string;
}

/**
 * The faults of a run of `durationMs`: every kind of `kinds` once in an order drawn from the seed, then
 * kinds drawn from it, each after a quiet gap of 5 to 10 s, until the run's end is near. A pause
 * outlasts the consumers' session timeout by 3 to 8 s, so that their groups take the paused replica
 * out. A partition cuts `isolatedBroker` (the one broker in a network namespace of its own) off.
 */
export function scheduleFaults(
  random: RandomGenerator,
  durationMs: number,
  replicas: readonly string[],
  brokers: readonly number[],
  sessionTimeoutMs: number,
  kinds: readonly FaultKind[],
  isolatedBroker?: number,
): Fault[] {
  const pick = <T>(items: readonly T[]): T => items[uniformInt(random, 0, items.length - 1)]!;
  const firsts = [...kinds];
  for (let i = firsts.length - 1; i > 0; i--) {
    const j = uniformInt(random, 0, i);
    [firsts[i], firsts[j]] = [firsts[j]!, firsts[i]!];
  }
  const consumers = replicas.filter((name) => /^(projector|webhook-dispatcher)/.test(name));
  const apis = replicas.filter((name) => /^api(-\d+)?$/.test(name));
  const stretch = () => uniformInt(random, 8_000, 20_000);
  const faults: Fault[] = [];
  let at = 10_000;
  for (;;) {
    const kind = firsts.shift() ?? pick(kinds);
    const fault: Fault =
      kind === 'kill-replica'
        ? { kind, atMs: at, target: pick(replicas), holdMs: uniformInt(random, 1_000, 5_000) }
        : kind === 'pause-replica'
          ? {
              kind,
              atMs: at,
              target: pick(consumers),
              holdMs: sessionTimeoutMs + uniformInt(random, 3_000, 8_000),
            }
          : kind === 'kill-broker' || kind === 'pause-broker' || kind === 'partition-broker'
            ? {
                kind,
                atMs: at,
                target: String(kind === 'partition-broker' ? isolatedBroker : pick(brokers)),
                holdMs: stretch(),
              }
            : kind === 'slow-postgres' || kind === 'slow-kafka'
              ? {
                  kind,
                  atMs: at,
                  target: `${kind.slice('slow-'.length)} links`,
                  holdMs: stretch(),
                  link: { latencyMs: uniformInt(random, 200, 500), jitterMs: uniformInt(random, 20, 150) },
                }
              : kind === 'reset-postgres' || kind === 'reset-kafka'
                ? {
                    kind,
                    atMs: at,
                    target: `${kind.slice('reset-'.length)} links`,
                    holdMs: stretch(),
                    link: {
                      resetAfterMs: uniformInt(random, 0, 2_000),
                      toxicity: uniformInt(random, 20, 60) / 100,
                    },
                  }
                : kind === 'cut-api-postgres'
                  ? { kind, atMs: at, target: pick(apis), holdMs: stretch() }
                  : { kind, atMs: at, target: 'postgres', holdMs: 0 };
    if (
      fault.atMs + fault.holdMs > durationMs - 5_000 &&
      firsts.length === 0 &&
      faults.length >= kinds.length
    )
      return faults;
    faults.push(fault);
    at = fault.atMs + fault.holdMs + uniformInt(random, 5_000, 10_000);
  }
}

/** What the faults act on. */
export interface Targets {
  readonly processes: readonly PlatformProcess[];
  readonly brokers: readonly KafkaNode[];
  /** The network namespace of the broker that partitions cut off (`--faults network`). */
  readonly isolated?: IsolatedHost;
  /** Each platform process's link to Postgres, by the process's name (`--faults network`). */
  readonly postgresLinks?: ProxiedService;
  /** The platform's link to each broker, `broker-<id>` (`--faults network`). */
  readonly kafkaLinks?: ProxiedService;
  /** The Postgres cluster's folder (its postmaster.pid names the postmaster). */
  readonly postgresLocation: string;
  /** Whether the embedded Postgres's watchdog has it down. */
  postgresDown(): boolean;
}

/** Samples the lag every 500 ms; `lagSince` answers with the largest lag and when it was next zero. */
export class LagSampler {
  private readonly samples: { atMs: number; lag: number | undefined }[] = [];
  private running = true;
  private readonly loop: Promise<void>;
  /** A consumer per group, never subscribed, that asks for the group's committed offsets. */
  private readonly askers = new Map<string, Promise<Consumer>>();

  /**
   * `subscriptions`: the platform's durable consumer groups and the stream types each reads (the
   * services' own lists), so that a group that has committed nothing on a topic it reads, or nothing
   * at all, is behind by the whole topic rather than not at all.
   */
  constructor(
    private readonly pool: Pool,
    private readonly kafka: Kafka,
    private readonly admin: Admin,
    private readonly topicPrefix: string,
    private readonly subscriptions: readonly { group: string; streamTypes: readonly string[] }[],
    private readonly started: number,
  ) {
    this.loop = this.run();
  }

  /** The largest lag seen in the whole run. */
  largest(): number {
    return Math.max(0, ...this.samples.map((sample) => sample.lag ?? 0));
  }

  /**
   * Between `fromMs` and `untilMs` (the next fault): the largest lag, and the first time at or after
   * `zeroAfterMs` it was zero.
   */
  since(fromMs: number, zeroAfterMs: number, untilMs: number): { maxLag: number; zeroMs?: number } {
    let maxLag = 0;
    for (const sample of this.samples) {
      if (sample.atMs < fromMs) continue;
      if (sample.atMs > untilMs) break;
      maxLag = Math.max(maxLag, sample.lag ?? 0);
      if (sample.atMs >= zeroAfterMs && sample.lag === 0) return { maxLag, zeroMs: sample.atMs };
    }
    return { maxLag };
  }

  /** The lag now: outbox rows plus uncommitted events of every durable consumer group. */
  async lag(): Promise<number | undefined> {
    try {
      // A sample taken while Postgres or a broker is down is lost (undefined), not the run.
      const { rows } = await this.pool.query<{ rows: number }>('SELECT count(*)::int AS rows FROM es.outbox');
      return rows[0]!.rows + (await this.consumerLag());
    } catch {
      return undefined;
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    const askers = [...this.askers.values()];
    this.askers.clear();
    await Promise.all(askers.map(async (asker) => (await asker.catch(() => undefined))?.disconnect()));
  }

  private async run(): Promise<void> {
    while (this.running) {
      const lag = await this.lag();
      this.samples.push({ atMs: Date.now() - this.started, lag });
      await sleep(500);
    }
  }

  /**
   * Events of the run's topics that the durable groups have not committed. A group of
   * `subscriptions` reads its stream types' topics from the beginning (the low-water mark) until it
   * commits, as the bus counts it (KafkaBus.uncommitted). A durable group the run does not know (a
   * transient one, `<group>-<uuid>`, comes and goes and counts for nothing) is counted where it
   * committed. A group's committed offsets are asked as a consumer of it (the admin client's
   * ListConsumerGroupOffsets and DescribeConsumerGroups crash the process in librdkafka 2.15).
   */
  private async consumerLag(): Promise<number> {
    const { groups } = await this.admin.listGroups();
    const known = new Map(
      this.subscriptions.map(({ group, streamTypes }) => [
        group,
        new Set(streamTypes.map((type) => `${this.topicPrefix}${type}`)),
      ]),
    );
    const durable = new Set([
      ...known.keys(),
      ...groups
        .map((group) => group.groupId)
        .filter((id) => !/-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id)),
    ]);
    const topics = (await this.admin.listTopics()).filter((topic) => topic.startsWith(this.topicPrefix));
    const partitions = (
      await Promise.all(
        topics.map(async (topic) =>
          (await this.admin.fetchTopicOffsets(topic)).map((p) => ({ topic, ...p })),
        ),
      )
    ).flat();
    let lag = 0;
    for (const groupId of durable) {
      const reads = known.get(groupId);
      const read = reads ? partitions.filter(({ topic }) => reads.has(topic)) : partitions;
      const committed = await (
        await this.asker(groupId)
      ).committed(
        read.map(({ topic, partition }) => ({ topic, partition })),
        5_000,
      );
      for (const { topic, partition, high, low } of read) {
        const at = Number(
          committed.find((c) => c.topic === topic && c.partition === partition)?.offset ?? -1,
        );
        if (at >= 0) lag += Math.max(0, Number(high) - at);
        else if (reads) lag += Number(high) - Number(low);
      }
    }
    return lag;
  }

  private asker(groupId: string): Promise<Consumer> {
    let asker = this.askers.get(groupId);
    if (!asker) {
      asker = (async () => {
        const consumer = this.kafka.consumer({ kafkaJS: { groupId } });
        await consumer.connect();
        return consumer;
      })();
      asker.catch(() => this.askers.delete(groupId));
      this.askers.set(groupId, asker);
    }
    return asker;
  }
}

/** Carries out one fault: takes the target down, waits `holdMs`, brings it back; resolves once it is back. */
export async function carryOut(fault: Fault, targets: Targets): Promise<void> {
  switch (fault.kind) {
    case 'kill-replica': {
      const process = processNamed(targets, fault.target);
      process.signal('SIGKILL');
      await process.exited();
      await sleep(fault.holdMs);
      await process.restart();
      return;
    }
    case 'pause-replica': {
      const process = processNamed(targets, fault.target);
      process.signal('SIGSTOP');
      await sleep(fault.holdMs);
      process.signal('SIGCONT');
      return;
    }
    case 'kill-broker': {
      const node = brokerNamed(targets, fault.target);
      await node.kill();
      await sleep(fault.holdMs);
      await node.restart();
      return;
    }
    case 'pause-broker': {
      // A broker that hangs rather than dies (a long pause, a host cut off): its connections stay open
      // and nothing it was asked is answered until it is continued.
      const pid = brokerNamed(targets, fault.target).pid()!;
      process.kill(pid, 'SIGSTOP');
      try {
        await sleep(fault.holdMs);
      } finally {
        process.kill(pid, 'SIGCONT');
      }
      return;
    }
    case 'partition-broker': {
      // Every packet between the broker and the rest (brokers, platform, the run) dropped silently, as
      // a cut cable does: no reset, no refusal; then the link as it was.
      const link = targets.isolated;
      if (!link) throw new Error('no broker in a network namespace to cut off');
      await link.partition();
      try {
        await sleep(fault.holdMs);
      } finally {
        await link.heal();
      }
      return;
    }
    case 'slow-postgres':
    case 'reset-postgres':
    case 'cut-api-postgres':
    case 'slow-kafka':
    case 'reset-kafka': {
      const kafka = fault.kind === 'slow-kafka' || fault.kind === 'reset-kafka';
      const links = kafka ? targets.kafkaLinks : targets.postgresLinks;
      if (!links)
        throw new Error(
          `the platform does not reach ${kafka ? 'the brokers' : 'Postgres'} through Toxiproxy`,
        );
      const { link } = fault;
      if (fault.kind === 'cut-api-postgres') await links.cut(fault.target);
      else if (link && 'latencyMs' in link) await links.slow(link);
      else if (link) await links.reset({ afterMs: link.resetAfterMs, toxicity: link.toxicity });
      try {
        await sleep(fault.holdMs);
      } finally {
        await links.heal();
      }
      return;
    }
    case 'restart-postgres': {
      // SIGKILL of the postmaster: a crash, from which the watchdog starts it again (crash recovery).
      const pid = Number(
        (await readFile(join(targets.postgresLocation, 'postmaster.pid'), 'utf8')).split('\n')[0],
      );
      process.kill(pid, 'SIGKILL');
      const deadline = Date.now() + 120_000;
      while (!targets.postgresDown() && Date.now() < deadline) await sleep(50);
      while (targets.postgresDown() && Date.now() < deadline) await sleep(100);
      if (targets.postgresDown()) throw new Error('Postgres was not back within 120 s');
      return;
    }
  }
}

function brokerNamed(targets: Targets, id: string): KafkaNode {
  const found = targets.brokers.find((each) => String(each.id) === id);
  if (!found) throw new Error(`no Kafka node ${id}`);
  return found;
}

function processNamed(targets: Targets, name: string): PlatformProcess {
  const found = targets.processes.find((each) => each.name === name);
  if (!found) throw new Error(`no platform process ${name}`);
  return found;
}
