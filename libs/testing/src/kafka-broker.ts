import { fileURLToPath } from 'node:url';
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import confluent from '@confluentinc/kafka-javascript';
import type { Logger } from '@ofp/runtime';
import type { NetworkPlace } from './network-namespace.js';
import { freePort } from './ports.js';
import { createCertificateAuthority } from './tls.js';

/**
 * The Apache Kafka release that {@link startKafkaBroker} runs. 4.3.1 is the newest release whose jars all
 * resolve from Maven Central (4.4.0's `kafka-tools-api` is not published there).
 */
export const KAFKA_VERSION = '4.3.1';

export interface KafkaBrokerOptions {
  /** Where the broker's jars are kept between runs, in `kafka-<version>/libs`. */
  cacheDir: string;
  logger: Logger;
  /** Also listen with SASL_SSL, as managed Kafka does ({@link SecureListener}). */
  saslSsl?: boolean;
}

/**
 * A SASL_SSL listener beside the plaintext one: TLS with a certificate of a CA made for this broker
 * alone, and one user whose password works with SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN. A client may
 * present a certificate of the same CA (the listener asks for one and verifies it).
 */
export interface SecureListener {
  readonly brokers: string[];
  /** PEM files in the broker's folder (deleted with it): the CA, and a client certificate and key. */
  readonly caFile: string;
  readonly clientCertFile: string;
  readonly clientKeyFile: string;
  readonly username: string;
  readonly password: string;
}

export interface RunningKafka {
  /** Bootstrap addresses (`host:port`): the plaintext listener. */
  brokers: string[];
  /** With `saslSsl`: the SASL_SSL listener and what a client needs to use it. */
  secure?: SecureListener;
  /** The broker's JVM process id. */
  pid: number;
  /** Stops the broker (SIGTERM, then SIGKILL if it lingers) and deletes its data. */
  stop(): Promise<void>;
}

export interface KafkaClusterOptions {
  /** Where the broker's jars are kept between runs, in `kafka-<version>/libs`. */
  cacheDir: string;
  logger: Logger;
  /** How many nodes, each a broker and a controller: 3 for a cluster that keeps a majority without one. */
  nodes: number;
  /** server.properties of every node over the harness's own, e.g. how often leadership is rebalanced. */
  settings?: Readonly<Record<string, string>>;
  /**
   * Where each node (by id) runs: its address and the command its JVM runs under, e.g. one node in a
   * network namespace of its own and the others at the address that namespace reaches
   * ({@link isolatedHost}). By default every node on 127.0.0.1, in the test's own namespace.
   */
  placement?: (nodeId: number) => NetworkPlace;
  /**
   * A listener of each node for the clients (`CLIENT`, plaintext) beside the one the nodes replicate
   * on, advertised at the address this resolves with for the node's id and the listener's own
   * `host:port`: e.g. a proxy in front of it, so that a client sees every broker through its proxy,
   * since a broker answers metadata with the addresses advertised for the listener that was asked
   * ({@link RunningKafkaCluster.clientBrokers}).
   */
  advertiseClientListener?: (nodeId: number, listener: string) => Promise<string>;
}

/** One node of a {@link RunningKafkaCluster}, which a chaos test may kill and start again. */
export interface KafkaNode {
  /** Its `node.id`, 1 to the number of nodes. */
  readonly id: number;
  /** `host:port` of its plaintext listener. */
  readonly broker: string;
  /** Its JVM's process id while it runs. */
  pid(): number | undefined;
  running(): boolean;
  /** Kills its JVM with SIGKILL, as a crash would, and resolves once it has exited. Its data is kept. */
  kill(): Promise<void>;
  /**
   * Starts the node again, on the same ports and with the data it had; resolves once it answers and
   * lists the nodes that were running.
   */
  restart(): Promise<void>;
}

export interface RunningKafkaCluster {
  /** Bootstrap addresses (`host:port`): every node's plaintext listener. */
  brokers: string[];
  /** With `advertiseClientListener`: every node's `CLIENT` listener, at its advertised address. */
  clientBrokers?: string[];
  nodes: readonly KafkaNode[];
  /**
   * Creates a topic whose partition `i` has the nodes `replicas[i]`, the first its preferred leader,
   * and resolves once each has its leader (Kafka's Java admin client, kafka/CreateTopic.java: the
   * Node.js clients' admin APIs cannot place replicas).
   */
  createTopic(topic: string, replicas: readonly (readonly number[])[]): Promise<void>;
  /** The node id of the active controller, the KRaft quorum's leader (kafka/QuorumLeader.java). */
  activeController(): Promise<number>;
  /** Stops every node (SIGTERM, then SIGKILL if one lingers) and deletes the cluster's folder. */
  stop(): Promise<void>;
}

const POM = fileURLToPath(new URL('../kafka/pom.xml', import.meta.url));
const CREATE_TOPIC = fileURLToPath(new URL('../kafka/CreateTopic.java', import.meta.url));
const QUORUM_LEADER = fileURLToPath(new URL('../kafka/QuorumLeader.java', import.meta.url));
/**
 * How long a node may take to answer after its (re)start. A SIGKILLed node of a three-node cluster
 * needs 4 to 8 s of CPU to answer again (its logs recovered, the metadata caught up), which at the
 * loads of a chaos run on two shared cores (30 and more) took over 60 s.
 */
const STARTUP_TIMEOUT_MS = 180_000;
const STOP_GRACE_MS = 15_000;
const OUTPUT_TAIL_LINES = 40;

/**
 * Runs the command given as arguments in the background and stops it when this shell's stdin reaches
 * end-of-file. Node holds the only writing end of that pipe, and the kernel closes it whenever Node
 * exits, however it exits (even SIGKILL, when no handler of ours runs), so the broker never outlives
 * the process that started it. Prints the broker's pid as its only line on stdout (the broker writes
 * to stderr), and exits with the broker. It leaves the broker's data alone: a node killed on purpose is
 * started again on it ({@link JANITOR} removes the folder).
 *
 * The pipe is passed on as fd 3 because POSIX sh gives background commands /dev/null as stdin before
 * applying their own redirections, so `<&0` would read /dev/null. The broker's output goes to the
 * shell's stderr through fd 4, and the shell's own stderr to /dev/null: once Node is gone, a job
 * status line written to the dead pipe ("Killed") would end the shell by SIGPIPE.
 */
const LIFELINE = `
exec 3<&0 4>&2 2>/dev/null
"$@" </dev/null >&4 2>&4 3<&- 4>&- &
broker=$!
echo "$broker"
{
  while read -r _; do :; done
  kill -TERM "$broker" 2>/dev/null
  i=0
  while [ "$i" -lt ${STOP_GRACE_MS / 100} ] && kill -0 "$broker" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
  kill -KILL "$broker" 2>/dev/null
} <&3 3<&- 4>&- &
lifeline=$!
exec 3<&- 4>&-
wait "$broker"
status=$?
kill "$lifeline" 2>/dev/null
exit "$status"
`;

/**
 * Removes the cluster's folder ($1) once Node is gone, the same way {@link LIFELINE} learns it: its
 * stdin reaches end-of-file. Node writes the pid of every broker it starts on that pipe, so that the
 * folder goes only after them (their lifelines kill them within the grace period). The wait is bounded,
 * as a pid of a broker killed long ago may have been given to some other process since.
 */
const JANITOR = `
pids=
while read -r pid; do pids="$pids $pid"; done
i=0
for pid in $pids; do
  while [ "$i" -lt ${(STOP_GRACE_MS + 5_000) / 100} ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
done
rm -rf "$1"
`;

// Warnings and errors only: the harness logs them at debug level and quotes the last ones when the
// broker fails to start. No shutdown hook: the console appender needs no flush, and log4j warns when the
// broker's own shutdown hook outruns it.
const LOG4J2_PROPERTIES = `status = warn
shutdownHook = disable
appender.console.type = Console
appender.console.name = console
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
`;

/**
 * Starts a single-node Apache Kafka broker in KRaft mode (broker and controller in one JVM) from the
 * official jars, with the machine's Java 17, on free loopback ports and with fresh storage in a new
 * temporary folder. The jars are fetched from Maven Central with `mvn` on first use and kept in
 * `cacheDir`. Resolves once the broker answers a metadata request.
 */
export async function startKafkaBroker(options: KafkaBrokerOptions): Promise<RunningKafka> {
  const kafka = await launchCluster({ ...options, nodes: 1 });
  const { brokers, secure } = kafka;
  return { brokers, ...(secure ? { secure } : {}), pid: kafka.nodes[0]!.pid()!, stop: () => kafka.stop() };
}

/**
 * Starts a cluster of `nodes` Kafka nodes as {@link startKafkaBroker} starts one, each a broker and a
 * controller of the same quorum, with replication settings as production clusters have them (three
 * replicas, two in sync for `acks=all`; fewer where there are fewer nodes). The nodes start together,
 * as the quorum needs a majority to elect a controller; resolves once every node lists them all.
 */
export function startKafkaCluster(options: KafkaClusterOptions): Promise<RunningKafkaCluster> {
  return launchCluster(options);
}

/** A node's place in the cluster: its id and loopback ports. */
interface NodeLayout {
  id: number;
  /** Where its listeners are, and what its command runs under. */
  place: NetworkPlace;
  port: number;
  controllerPort: number;
  /** With `saslSsl`. */
  securePort?: number;
  /** With `advertiseClientListener`: its `CLIENT` listener's port and advertised address. */
  client?: { port: number; advertised: string };
}

/** What a cluster's node is to the cluster itself: a {@link KafkaNode} that it starts and stops. */
interface ClusterNode extends KafkaNode {
  /** Starts the node; resolves once it answers and lists the nodes of `expected`. */
  start(expected: number[]): Promise<void>;
  stop(): Promise<void>;
}

async function launchCluster(
  options: KafkaClusterOptions & Pick<KafkaBrokerOptions, 'saslSsl'>,
): Promise<RunningKafkaCluster & { secure?: SecureListener }> {
  const { logger } = options;
  if (!Number.isInteger(options.nodes) || options.nodes < 1)
    throw new Error(`a Kafka cluster needs 1 or more nodes, not ${options.nodes}`);
  const libs = await fetchKafkaJars(options.cacheDir, logger);
  const classpath = join(libs, '*');
  const java = process.env.JAVA_HOME ? join(process.env.JAVA_HOME, 'bin', 'java') : 'java';
  const layout: NodeLayout[] = [];
  for (let id = 1; id <= options.nodes; id++) {
    const [port, controllerPort] = [await freePort(), await freePort()];
    const place = options.placement?.(id) ?? { address: '127.0.0.1', prefix: [] };
    const clientPort = options.advertiseClientListener && (await freePort());
    layout.push({
      id,
      place,
      port,
      controllerPort,
      ...(options.saslSsl ? { securePort: await freePort() } : {}),
      ...(clientPort
        ? {
            client: {
              port: clientPort,
              advertised: await options.advertiseClientListener!(id, `${place.address}:${clientPort}`),
            },
          }
        : {}),
    });
  }
  const brokers = layout.map((node) => `${node.place.address}:${node.port}`);
  const clientBrokers = options.advertiseClientListener
    ? layout.map((node) => node.client!.advertised)
    : undefined;
  const dir = await mkdtemp(join(tmpdir(), 'ofp-kafka-'));
  // Detached, as the lifelines are: a Ctrl-C in the terminal goes to Node alone. Unreferenced: the
  // nodes are what keep Node running, not their janitor.
  const janitor = spawn('sh', ['-c', JANITOR, 'kafka-janitor', dir], {
    detached: true,
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  janitor.unref();
  (janitor.stdin as Socket).unref();
  // Should the janitor be gone, Node removes the folder itself on stop(); a write to it must not throw.
  janitor.stdin.on('error', () => {});

  const log4j = [`-Dlog4j2.configurationFile=${join(dir, 'log4j2.properties')}`];
  const nodeDir = (node: NodeLayout) => join(dir, `node-${node.id}`);
  const serverProperties = (node: NodeLayout) => join(nodeDir(node), 'server.properties');
  let secure: SecureListener | undefined;
  let nodes: ClusterNode[] = [];
  let stopping = false;
  async function stop(): Promise<void> {
    stopping = true;
    await Promise.all(nodes.map((node) => node.stop()));
    await rm(dir, { recursive: true, force: true });
    janitor.stdin.end();
  }

  const started = Date.now();
  try {
    await writeFile(join(dir, 'log4j2.properties'), LOG4J2_PROPERTIES);
    const scram: string[] = [];
    if (options.saslSsl) {
      secure = await secureListenerFiles(
        dir,
        layout.flatMap((node) => node.securePort ?? []),
      );
      // SCRAM credentials live in the cluster metadata: the storage tool writes them at format time.
      for (const mechanism of ['SCRAM-SHA-512', 'SCRAM-SHA-256'])
        scram.push('--add-scram', `${mechanism}=[name=${secure.username},password=${secure.password}]`);
    }
    const uuid = clusterId();
    await Promise.all(
      layout.map(async (node) => {
        let settings = { ...brokerConfig(node, layout, join(nodeDir(node), 'data')), ...options.settings };
        if (secure && node.securePort)
          settings = { ...settings, ...saslSslConfig(settings, secure, node.securePort, dir) };
        await mkdir(nodeDir(node));
        await writeFile(serverProperties(node), propertiesText(settings));
        // `--standalone` must not be given: controller.quorum.voters already names the quorum.
        const formatted = await run(java, [
          ...log4j,
          '-cp',
          classpath,
          'kafka.tools.StorageTool',
          'format',
          '-t',
          uuid,
          '-c',
          serverProperties(node),
          ...scram,
        ]);
        logger.debug({ kafka: formatted.trim(), kafkaNode: node.id }, 'formatted Kafka storage');
      }),
    );

    const jvm = [...jvmOptions(layout.length), ...log4j, '-cp', classpath, 'kafka.Kafka'];
    nodes = layout.map((node) =>
      clusterNode({
        id: node.id,
        broker: `${node.place.address}:${node.port}`,
        command: [...node.place.prefix, java, ...jvm, serverProperties(node)],
        logger,
        janitor: janitor.stdin,
        stopping: () => stopping,
        runningNodes: () => nodes.filter((other) => other.running()).map((other) => other.id),
      }),
    );
    // Settled, not raced: a node still starting when another failed is stopped with the rest.
    const starts = await Promise.allSettled(nodes.map((node) => node.start(layout.map(({ id }) => id))));
    const failed = starts.find((start) => start.status === 'rejected');
    if (failed) throw failed.reason;
  } catch (error) {
    await stop();
    throw error;
  }
  logger.info(
    {
      brokers,
      secure: secure?.brokers,
      brokerPids: nodes.map((node) => node.pid()),
      version: KAFKA_VERSION,
      ms: Date.now() - started,
    },
    nodes.length === 1 ? 'Kafka broker started' : 'Kafka cluster started',
  );
  let stopped: Promise<void> | undefined;
  const createTopic = async (topic: string, replicas: readonly (readonly number[])[]): Promise<void> => {
    const assignment = replicas.map((nodes) => nodes.join(':')).join(',');
    await run(java, [...log4j, '-cp', classpath, CREATE_TOPIC, brokers.join(','), topic, assignment]);
  };
  const activeController = async (): Promise<number> => {
    const output = await run(java, [...log4j, '-cp', classpath, QUORUM_LEADER, brokers.join(',')]);
    const leader = /^leader=(\d+)$/m.exec(output)?.[1];
    if (!leader) throw new Error(`no quorum leader in QuorumLeader.java's output:\n${output}`);
    return Number(leader);
  };
  return {
    brokers,
    ...(clientBrokers ? { clientBrokers } : {}),
    ...(secure ? { secure } : {}),
    nodes,
    createTopic,
    activeController,
    stop: () => (stopped ??= stop()),
  };
}

/**
 * Enough for test traffic; Kafka's own start script defaults to 1 GB. The nodes of a cluster get less:
 * three of them share a two-core machine with the platform's processes. The client compiler alone
 * and the serial collector: a test broker's traffic does not repay the optimising compiler's work, and
 * a start spends much of its CPU on it: a SIGKILLed node of three answered again after 7.2-7.9 s of
 * CPU with the JVM's defaults, 4.3-4.5 s with these (two restarts each, loads of 14 to 21).
 */
function jvmOptions(nodes: number): string[] {
  return [
    '-Xms128m',
    nodes === 1 ? '-Xmx512m' : '-Xmx384m',
    '-XX:TieredStopAtLevel=1',
    '-XX:+UseSerialGC',
    '-Djava.awt.headless=true',
  ];
}

interface NodeContext {
  id: number;
  broker: string;
  /** The JVM and its arguments. */
  command: string[];
  logger: Logger;
  /** The janitor's stdin, told every broker's pid. */
  janitor: NodeJS.WritableStream;
  stopping(): boolean;
  /** The ids of the cluster's running nodes. */
  runningNodes(): number[];
}

function clusterNode(context: NodeContext): ClusterNode {
  const { id, broker } = context;
  let jvm: BrokerProcess | undefined;
  const running = () => jvm !== undefined && jvm.exit() === undefined;
  async function stop(signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
    await jvm?.stop(signal);
  }

  async function start(expected: number[]): Promise<void> {
    if (context.stopping()) throw new Error('the Kafka cluster is stopped');
    if (running()) throw new Error(`Kafka node ${id} is already running`);
    const started = await spawnBroker(id, context.command, context.logger);
    jvm = started;
    context.janitor.write(`${started.pid}\n`);
    try {
      await waitUntilAnswering(id, broker, expected, () => started.exit());
    } catch (error) {
      await started.stop('SIGTERM');
      const output = `Last lines of the broker's output:\n${started.output()}`;
      throw new Error(`${(error as Error).message}\n${output}`, { cause: error });
    }
  }

  return {
    id,
    broker,
    pid: () => (running() ? jvm?.pid : undefined),
    running,
    kill: () => stop('SIGKILL'),
    restart: () => start([...new Set([...context.runningNodes(), id])]),
    start,
    stop: () => stop('SIGTERM'),
  };
}

interface BrokerProcess {
  readonly pid: number;
  /** How the broker exited (`code 1`, `signal SIGKILL`); undefined while it runs. */
  exit(): string | undefined;
  /** The last lines of its output, or `(none)`. */
  output(): string;
  /** Sends it `signal` (SIGKILL if it lingers), and resolves once it has exited, which is not an error. */
  stop(signal: 'SIGTERM' | 'SIGKILL'): Promise<void>;
}

/** Starts a broker under a {@link LIFELINE}; resolves with its pid. */
async function spawnBroker(id: number, command: string[], logger: Logger): Promise<BrokerProcess> {
  // Detached: a Ctrl-C in the terminal goes to Node alone, which stops the broker through the lifeline.
  const child = spawn('sh', ['-c', LIFELINE, 'kafka-lifeline', ...command], {
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const tail: string[] = [];
  createInterface({ input: child.stderr }).on('line', (line) => {
    tail.push(line);
    if (tail.length > OUTPUT_TAIL_LINES) tail.shift();
    logger.debug({ kafka: line, kafkaNode: id }, 'kafka broker output');
  });
  let exit: string | undefined;
  let expected = false;
  const output = () => (tail.length ? tail.join('\n') : '(none)');
  const exited = new Promise<void>((resolveExit) =>
    child.once('exit', (code, signal) => {
      exit = signal ? `signal ${signal}` : `code ${code}`;
      if (!expected)
        logger.error({ exit, kafkaNode: id, output: output() }, 'the Kafka broker exited on its own');
      resolveExit();
    }),
  );
  const pid = await new Promise<number>((resolvePid, reject) => {
    createInterface({ input: child.stdout }).once('line', (line) => resolvePid(Number(line)));
    child.once('error', reject);
    void exited.then(() =>
      reject(new Error(`the Kafka lifeline shell exited (${exit}) before starting the broker`)),
    );
  });

  async function stop(signalName: 'SIGTERM' | 'SIGKILL'): Promise<void> {
    expected = true;
    if (exit === undefined) {
      signal(pid, signalName);
      if (!(await settlesWithin(exited, STOP_GRACE_MS))) {
        logger.warn(
          { brokerPid: pid, kafkaNode: id },
          `the Kafka broker did not stop within ${STOP_GRACE_MS} ms; killing it`,
        );
        signal(pid, 'SIGKILL');
        await settlesWithin(exited, STOP_GRACE_MS);
      }
    }
    child.stdin.destroy();
  }

  return { pid, exit: () => exit, output, stop };
}

/**
 * Copies the broker's runtime classpath into `<cacheDir>/kafka-<version>/libs` with `mvn`, once. The copy
 * is made in a staging folder and renamed into place, so a fetch that was interrupted is never taken for
 * a complete one; the pom it was made from is kept beside it, so that editing the pom fetches again.
 */
async function fetchKafkaJars(cacheDir: string, logger: Logger): Promise<string> {
  const pom = await readFile(POM, 'utf8');
  const home = join(cacheDir, `kafka-${KAFKA_VERSION}`);
  const libs = join(home, 'libs');
  if (await isMadeFrom(home, pom)) return libs;

  await mkdir(cacheDir, { recursive: true });
  const staging = await mkdtemp(join(cacheDir, `kafka-${KAFKA_VERSION}.partial-`));
  try {
    logger.info({ version: KAFKA_VERSION, into: home }, 'fetching the Kafka broker jars from Maven Central');
    const started = Date.now();
    await run('mvn', [
      '-q',
      '-B',
      '-f',
      POM,
      'dependency:copy-dependencies',
      '-DincludeScope=runtime',
      `-DoutputDirectory=${join(staging, 'libs')}`,
      `-Dkafka.version=${KAFKA_VERSION}`,
    ]);
    await writeFile(join(staging, 'pom.xml'), pom);
    try {
      await rename(staging, home);
    } catch {
      // Another process finished the same fetch first (use its copy), or an outdated copy is in the way.
      if (!(await isMadeFrom(home, pom))) {
        await rm(home, { recursive: true, force: true });
        await rename(staging, home);
      }
    }
    logger.info({ version: KAFKA_VERSION, ms: Date.now() - started }, 'fetched the Kafka broker jars');
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  return libs;
}

async function isMadeFrom(home: string, pom: string): Promise<boolean> {
  return (await readFile(join(home, 'pom.xml'), 'utf8').catch(() => undefined)) === pom;
}

type BrokerSettings = Record<string, string>;

/** The settings of `node` in a cluster of `cluster` (in which it is). */
function brokerConfig(node: NodeLayout, cluster: NodeLayout[], dataDir: string): BrokerSettings {
  // As production clusters have it: three replicas, of which two must have a write with acks=all. A
  // smaller cluster cannot have as many; one node has one replica of everything, internal topics too.
  const replicas = String(Math.min(3, cluster.length));
  const minInSync = String(Math.min(2, cluster.length));
  // The nodes replicate and the harness asks on PLAINTEXT; the clients of advertiseClientListener on CLIENT.
  const client = node.client && {
    listeners: `,CLIENT://${node.place.address}:${node.client.port}`,
    advertised: `,CLIENT://${node.client.advertised}`,
    protocol: ',CLIENT:PLAINTEXT',
  };
  return {
    'process.roles': 'broker,controller',
    'node.id': String(node.id),
    'controller.quorum.voters': cluster
      .map(({ id, place, controllerPort }) => `${id}@${place.address}:${controllerPort}`)
      .join(','),
    listeners: `PLAINTEXT://${node.place.address}:${node.port},CONTROLLER://${node.place.address}:${node.controllerPort}${client?.listeners ?? ''}`,
    'advertised.listeners': `PLAINTEXT://${node.place.address}:${node.port}${client?.advertised ?? ''}`,
    'listener.security.protocol.map': `PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT${client?.protocol ?? ''}`,
    'controller.listener.names': 'CONTROLLER',
    'inter.broker.listener.name': 'PLAINTEXT',
    'log.dirs': dataDir,
    'default.replication.factor': replicas,
    'min.insync.replicas': minInSync,
    'offsets.topic.replication.factor': replicas,
    'transaction.state.log.replication.factor': replicas,
    'transaction.state.log.min.isr': minInSync,
    'share.coordinator.state.topic.replication.factor': replicas,
    'share.coordinator.state.topic.min.isr': minInSync,
    // A killed leader's partitions wait for it rather than lose what only it had (Kafka's default).
    'unclean.leader.election.enable': 'false',
    // How long a node that stops answering stays in the in-sync replicas, holding back every acks=all
    // write to the partitions it replicates: fenced by the controller after 9 s without a heartbeat
    // (one every 2 s), or taken out by a partition's leader after 30 s behind. Kafka's defaults, which
    // a production cluster should keep (docs/kafka.md, network faults), written out so that a new
    // release does not move the network-fault test's figures.
    'broker.session.timeout.ms': '9000',
    'broker.heartbeat.interval.ms': '2000',
    'replica.lag.time.max.ms': '30000',
    // Tests start consumer groups often; the default 3 s delay before the first rebalance only slows them.
    'group.initial.rebalance.delay.ms': '0',
  };
}

function propertiesText(settings: BrokerSettings): string {
  return Object.entries(settings)
    .map(([key, value]) => `${key}=${value}`)
    .join('\n');
}

/**
 * A CA of this cluster's own, the brokers' certificate (one for all, as they all are 127.0.0.1) and a
 * client's, written as PEM into `dir`.
 */
async function secureListenerFiles(dir: string, securePorts: number[]): Promise<SecureListener> {
  const ca = createCertificateAuthority('ofp test Kafka CA');
  const [server, client] = [ca.issue('kafka-broker'), ca.issue('ofp-test-client')];
  const files = {
    caFile: join(dir, 'ca.crt'),
    clientCertFile: join(dir, 'client.crt'),
    clientKeyFile: join(dir, 'client.key'),
  };
  await writeFile(files.caFile, ca.cert);
  await writeFile(files.clientCertFile, client.cert);
  await writeFile(files.clientKeyFile, client.key, { mode: 0o600 });
  // The broker's PEM key store: its key and certificate chain in one file.
  await writeFile(join(dir, 'broker.pem'), `${server.key}\n${server.cert}\n${ca.cert}`, { mode: 0o600 });
  return {
    brokers: securePorts.map((port) => `127.0.0.1:${port}`),
    ...files,
    username: 'ofp',
    password: randomBytes(12).toString('base64url'),
  };
}

/**
 * The SASL_SSL listener beside the plaintext one, which stays for the broker's own traffic and the
 * tests' setup. PLAIN checks the password in its JAAS line; SCRAM in the cluster's metadata.
 */
function saslSslConfig(
  base: BrokerSettings,
  secure: SecureListener,
  securePort: number,
  dir: string,
): BrokerSettings {
  const scram = 'org.apache.kafka.common.security.scram.ScramLoginModule required;';
  return {
    listeners: `${base.listeners},SASL_SSL://127.0.0.1:${securePort}`,
    'advertised.listeners': `${base['advertised.listeners']},SASL_SSL://127.0.0.1:${securePort}`,
    'listener.security.protocol.map': `${base['listener.security.protocol.map']},SASL_SSL:SASL_SSL`,
    'sasl.enabled.mechanisms': 'SCRAM-SHA-512,SCRAM-SHA-256,PLAIN',
    'listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config': scram,
    'listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config': scram,
    'listener.name.sasl_ssl.plain.sasl.jaas.config': `org.apache.kafka.common.security.plain.PlainLoginModule required user_${secure.username}="${secure.password}";`,
    'listener.name.sasl_ssl.ssl.keystore.type': 'PEM',
    'listener.name.sasl_ssl.ssl.keystore.location': join(dir, 'broker.pem'),
    'listener.name.sasl_ssl.ssl.truststore.type': 'PEM',
    'listener.name.sasl_ssl.ssl.truststore.location': secure.caFile,
    'listener.name.sasl_ssl.ssl.client.auth': 'requested',
  };
}

/**
 * A cluster id as `kafka-storage random-uuid` makes them: 16 random bytes in URL-safe base64. Like
 * Kafka's `Uuid.randomUuid`, it never starts with '-', which the storage tool would read as an option.
 */
function clusterId(): string {
  for (;;) {
    const id = randomBytes(16).toString('base64url');
    if (!id.startsWith('-')) return id;
  }
}

/**
 * Resolves once the node answers a metadata request on `broker` (librdkafka's, sent to that node alone)
 * that lists the nodes of `expected`; rejects once it exited, or after {@link STARTUP_TIMEOUT_MS}.
 */
async function waitUntilAnswering(
  id: number,
  broker: string,
  expected: number[],
  exit: () => string | undefined,
): Promise<void> {
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  let lastError: unknown;
  for (;;) {
    try {
      const listed = await listedNodes(broker);
      const missing = expected.filter((nodeId) => !listed.includes(nodeId));
      if (missing.length === 0) return;
      lastError = `nodes ${missing.join(',')} are not listed yet`;
    } catch (error) {
      lastError = error;
    }
    const exitStatus = exit();
    if (exitStatus)
      throw new Error(
        `the Kafka broker of node ${id} exited (${exitStatus}) before it answered on ${broker}`,
      );
    if (Date.now() > deadline) {
      throw new Error(
        `the Kafka broker of node ${id} did not answer on ${broker} within ${STARTUP_TIMEOUT_MS} ms (last error: ${String(lastError)})`,
      );
    }
    await sleep(200);
  }
}

/** The node ids that `broker` lists in its metadata, asked once, within a second and a half. */
function listedNodes(broker: string): Promise<number[]> {
  const client = new confluent.Producer({
    'bootstrap.servers': broker,
    'client.id': 'kafka-broker-readiness',
    'socket.connection.setup.timeout.ms': 1_000,
    log_level: 0,
  });
  return new Promise<number[]>((resolveNodes, reject) => {
    client.connect({ timeout: 1_500 }, (error, metadata) => {
      if (error) reject(new Error(error.message));
      else resolveNodes(metadata.brokers.map((node) => node.id));
    });
  }).finally(() => new Promise<void>((done) => client.disconnect(() => done())));
}

async function run(command: string, args: string[]): Promise<string> {
  try {
    const { stdout, stderr } = await promisify(execFile)(command, args, { maxBuffer: 16 * 1024 * 1024 });
    return stdout + stderr;
  } catch (error) {
    const {
      code,
      stdout = '',
      stderr = '',
    } = error as NodeJS.ErrnoException & { stdout?: string; stderr?: string };
    if (code === 'ENOENT') {
      throw new Error(`${command} is not on the PATH: the local Kafka broker needs Java 17 and Maven`, {
        cause: error,
      });
    }
    const output = `${stdout}${stderr}`.trim().split('\n').slice(-30).join('\n');
    throw new Error(`${command} ${args.join(' ')} failed:\n${output}`, { cause: error });
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}

function settlesWithin(promise: Promise<void>, ms: number): Promise<boolean> {
  return new Promise((resolveSettled) => {
    const timer = setTimeout(() => resolveSettled(false), ms);
    void promise.then(() => {
      clearTimeout(timer);
      resolveSettled(true);
    });
  });
}
