import { fileURLToPath } from 'node:url';
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { Kafka, logLevel } from 'kafkajs';
import type { Logger } from '@ofp/runtime';
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
  /** Bootstrap addresses (`host:port`) for kafkajs: the plaintext listener. */
  brokers: string[];
  /** With `saslSsl`: the SASL_SSL listener and what a client needs to use it. */
  secure?: SecureListener;
  /** The broker's JVM process id. */
  pid: number;
  /** Stops the broker (SIGTERM, then SIGKILL if it lingers) and deletes its data. */
  stop(): Promise<void>;
}

const POM = fileURLToPath(new URL('../kafka/pom.xml', import.meta.url));
// Enough for test traffic; Kafka's own start script defaults to 1 GB.
const JVM_OPTIONS = ['-Xms128m', '-Xmx512m', '-Djava.awt.headless=true'];
const STARTUP_TIMEOUT_MS = 60_000;
const STOP_GRACE_MS = 15_000;
const OUTPUT_TAIL_LINES = 40;

/**
 * Runs the command given as arguments in the background and stops it when this shell's stdin reaches
 * end-of-file. Node holds the only writing end of that pipe, and the kernel closes it whenever Node
 * exits, however it exits (even SIGKILL, when no handler of ours runs), so the broker never outlives
 * the process that started it. Prints the broker's pid as its only line on stdout (the broker writes
 * to stderr), and removes the broker's folder ($1) once the broker is gone.
 *
 * The pipe is passed on as fd 3 because POSIX sh gives background commands /dev/null as stdin before
 * applying their own redirections, so `<&0` would read /dev/null. The broker's output goes to the
 * shell's stderr through fd 4, and the shell's own stderr to /dev/null: once Node is gone, a job
 * status line written to the dead pipe ("Killed") would end the shell by SIGPIPE before it cleans up.
 */
const LIFELINE = `
dir=$1
shift
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
rm -rf "$dir"
exit "$status"
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
 * `cacheDir`. Resolves once the broker answers a kafkajs `describeCluster`.
 */
export async function startKafkaBroker(options: KafkaBrokerOptions): Promise<RunningKafka> {
  const { logger } = options;
  const libs = await fetchKafkaJars(options.cacheDir, logger);
  const classpath = join(libs, '*');
  const port = await freePort();
  let controllerPort = await freePort();
  while (controllerPort === port) controllerPort = await freePort();
  const java = process.env.JAVA_HOME ? join(process.env.JAVA_HOME, 'bin', 'java') : 'java';
  const dir = await mkdtemp(join(tmpdir(), 'ofp-kafka-'));
  const brokers = [`127.0.0.1:${port}`];
  const serverProperties = join(dir, 'server.properties');
  const log4j = [`-Dlog4j2.configurationFile=${join(dir, 'log4j2.properties')}`];
  let secure: SecureListener | undefined;
  const scram: string[] = [];
  try {
    let settings = brokerConfig(port, controllerPort, join(dir, 'data'));
    if (options.saslSsl) {
      let securePort = await freePort();
      while (securePort === port || securePort === controllerPort) securePort = await freePort();
      secure = await secureListenerFiles(dir, securePort);
      settings = { ...settings, ...saslSslConfig(settings, secure, securePort, dir) };
      // SCRAM credentials live in the cluster metadata: the storage tool writes them at format time.
      for (const mechanism of ['SCRAM-SHA-512', 'SCRAM-SHA-256'])
        scram.push('--add-scram', `${mechanism}=[name=${secure.username},password=${secure.password}]`);
    }
    await writeFile(serverProperties, propertiesText(settings));
    await writeFile(join(dir, 'log4j2.properties'), LOG4J2_PROPERTIES);
    // `--standalone` must not be given: controller.quorum.voters already names the quorum.
    const formatted = await run(java, [
      ...log4j,
      '-cp',
      classpath,
      'kafka.tools.StorageTool',
      'format',
      '-t',
      clusterId(),
      '-c',
      serverProperties,
      ...scram,
    ]);
    logger.debug({ kafka: formatted.trim() }, 'formatted Kafka storage');
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }

  const started = Date.now();
  // Detached: a Ctrl-C in the terminal goes to Node alone, which stops the broker through the lifeline.
  const child = spawn(
    'sh',
    [
      '-c',
      LIFELINE,
      'kafka-lifeline',
      dir,
      java,
      ...JVM_OPTIONS,
      ...log4j,
      '-cp',
      classpath,
      'kafka.Kafka',
      serverProperties,
    ],
    { detached: true, stdio: ['pipe', 'pipe', 'pipe'] },
  );
  const tail: string[] = [];
  createInterface({ input: child.stderr }).on('line', (line) => {
    tail.push(line);
    if (tail.length > OUTPUT_TAIL_LINES) tail.shift();
    logger.debug({ kafka: line }, 'kafka broker output');
  });
  let exit: string | undefined;
  let stopping = false;
  const exited = new Promise<void>((resolveExit) =>
    child.once('exit', (code, signal) => {
      exit = signal ? `signal ${signal}` : `code ${code}`;
      if (!stopping) logger.error({ exit, output: tail.join('\n') }, 'the Kafka broker exited on its own');
      resolveExit();
    }),
  );
  const pid = await new Promise<number>((resolvePid, reject) => {
    createInterface({ input: child.stdout }).once('line', (line) => resolvePid(Number(line)));
    child.once('error', reject);
    void exited.then(() =>
      reject(new Error(`the Kafka lifeline shell exited (${exit}) before starting the broker`)),
    );
  }).catch(async (error: unknown) => {
    await rm(dir, { recursive: true, force: true });
    throw error;
  });

  async function stop(): Promise<void> {
    stopping = true;
    if (exit === undefined) {
      signal(pid, 'SIGTERM');
      if (!(await settlesWithin(exited, STOP_GRACE_MS))) {
        logger.warn(
          { brokerPid: pid },
          `the Kafka broker did not stop within ${STOP_GRACE_MS} ms; killing it`,
        );
        signal(pid, 'SIGKILL');
        await settlesWithin(exited, STOP_GRACE_MS);
      }
    }
    child.stdin.destroy();
    await rm(dir, { recursive: true, force: true });
  }

  try {
    await waitUntilAnswering(brokers, () => exit);
  } catch (error) {
    await stop();
    const output = tail.length ? tail.join('\n') : '(none)';
    throw new Error(`${(error as Error).message}\nLast lines of the broker's output:\n${output}`, {
      cause: error,
    });
  }
  logger.info(
    { brokers, secure: secure?.brokers, brokerPid: pid, version: KAFKA_VERSION, ms: Date.now() - started },
    'Kafka broker started',
  );
  let stopped: Promise<void> | undefined;
  return { brokers, ...(secure ? { secure } : {}), pid, stop: () => (stopped ??= stop()) };
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

function brokerConfig(port: number, controllerPort: number, dataDir: string): BrokerSettings {
  return {
    'process.roles': 'broker,controller',
    'node.id': '1',
    'controller.quorum.voters': `1@127.0.0.1:${controllerPort}`,
    listeners: `PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controllerPort}`,
    'advertised.listeners': `PLAINTEXT://127.0.0.1:${port}`,
    'listener.security.protocol.map': 'PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT',
    'controller.listener.names': 'CONTROLLER',
    'inter.broker.listener.name': 'PLAINTEXT',
    'log.dirs': dataDir,
    // One broker: the internal topics cannot have the default three replicas.
    'offsets.topic.replication.factor': '1',
    'transaction.state.log.replication.factor': '1',
    'transaction.state.log.min.isr': '1',
    'share.coordinator.state.topic.replication.factor': '1',
    'share.coordinator.state.topic.min.isr': '1',
    // Tests start consumer groups often; the default 3 s delay before the first rebalance only slows them.
    'group.initial.rebalance.delay.ms': '0',
  };
}

function propertiesText(settings: BrokerSettings): string {
  return Object.entries(settings)
    .map(([key, value]) => `${key}=${value}`)
    .join('\n');
}

/** A CA of this broker's own, the broker's certificate and a client's, written as PEM into `dir`. */
async function secureListenerFiles(dir: string, securePort: number): Promise<SecureListener> {
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
    brokers: [`127.0.0.1:${securePort}`],
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

async function waitUntilAnswering(brokers: string[], exit: () => string | undefined): Promise<void> {
  const kafka = new Kafka({
    clientId: 'kafka-broker-readiness',
    brokers,
    logLevel: logLevel.NOTHING,
    connectionTimeout: 1_000,
    retry: { retries: 0 },
  });
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  let lastError: unknown;
  for (;;) {
    const admin = kafka.admin();
    try {
      await admin.connect();
      if ((await admin.describeCluster()).brokers.length > 0) return;
    } catch (error) {
      lastError = error;
    } finally {
      await admin.disconnect();
    }
    const exitStatus = exit();
    if (exitStatus)
      throw new Error(`the Kafka broker exited (${exitStatus}) before it answered on ${brokers.join(',')}`);
    if (Date.now() > deadline) {
      throw new Error(
        `the Kafka broker did not answer on ${brokers.join(',')} within ${STARTUP_TIMEOUT_MS} ms (last error: ${String(lastError)})`,
      );
    }
    await sleep(200);
  }
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
