// @runs-alone: kills and restarts nodes of a three-node cluster under writes
import { fileURLToPath } from 'node:url';
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { dirname } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import confluent, { type KafkaJS } from '@confluentinc/kafka-javascript';
import { kafkaClientConfig } from '@ofp/bus';
import { startKafkaBroker, startKafkaCluster } from './kafka-broker.js';
import { testLogger } from './logger.js';
import { freePort } from './ports.js';
import { CACHE_DIR } from './postgres.js';

const REPO_ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const { Kafka, IsolationLevel } = confluent.KafkaJS;

/** Polls the topic's metadata until every partition has a leader (createTopics does not wait). */
async function ledWithin(admin: KafkaJS.Admin, topic: string, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    const [described] = await admin.fetchTopicMetadata({ topics: [topic] }).catch(() => []);
    if (described && described.partitions.length > 0 && described.partitions.every((p) => p.leader >= 0))
      return;
    if (Date.now() > deadline) throw new Error(`${topic} has no leader after ${ms} ms`);
    await sleep(200);
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function gone(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (isAlive(pid) && Date.now() < deadline) await sleep(100);
  return !isAlive(pid);
}

async function within<T>(promise: Promise<T>, ms: number, describeTimeout: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(describeTimeout())), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

describe('the Kafka of the test run (KAFKA_BROKERS)', () => {
  const KEYS = 5;
  const PER_KEY = 20;

  it('delivers keyed messages with their headers to a consumer group, in order per key', async () => {
    const brokers = process.env.KAFKA_BROKERS?.split(',');
    if (!brokers) throw new Error('KAFKA_BROKERS is not set: run integration tests through jest');
    const kafka = new Kafka(kafkaClientConfig(brokers, 'kafka-broker-test'));
    const topic = `kafka-broker-test-${randomUUID()}`;
    const admin = kafka.admin();
    // One request in flight: a producer that is not idempotent keeps a key's order across a retry only
    // so. The first request to a topic just created can meet "Not leader for partition" while the
    // broker loads it, and with more in flight the next one overtook it (received event-0 after
    // event-15, once in two runs).
    const producer = kafka.producer({ 'linger.ms': 0, 'max.in.flight.requests.per.connection': 1 });
    const consumer = kafka.consumer({
      kafkaJS: { groupId: `kafka-broker-test-${randomUUID()}`, fromBeginning: true },
    });
    try {
      await admin.connect();
      await admin.createTopics({ topics: [{ topic, numPartitions: 3 }] });
      await ledWithin(admin, topic, 30_000);
      const sent = Array.from({ length: KEYS * PER_KEY }, (_, i) => ({
        key: `order-${i % KEYS}`,
        value: JSON.stringify({ seq: Math.floor(i / KEYS) }),
        headers: { 'ce-id': `event-${i}` },
      }));
      await producer.connect();
      // Several sends, so that order within a key has to survive more than one batch.
      // Copies: the client's send rewrites the messages it is given (headers, value, partition).
      for (let i = 0; i < sent.length; i += 17)
        await producer.send({
          topic,
          messages: sent.slice(i, i + 17).map((message) => ({ ...message, headers: { ...message.headers } })),
        });

      const received: Message[] = [];
      await consumer.connect();
      await consumer.subscribe({ topics: [topic] });
      const allReceived = new Promise<void>((resolve) => {
        void consumer.run({
          eachMessage: ({ message }) => {
            const headers = Object.entries(message.headers ?? {}).map(([name, value]) => [
              name,
              String(value),
            ]);
            received.push({
              key: message.key!.toString(),
              value: message.value!.toString(),
              headers: Object.fromEntries(headers) as Record<string, string>,
            });
            if (received.length === sent.length) resolve();
            return Promise.resolve();
          },
        });
      });
      await within(allReceived, 30_000, () => `received ${received.length} of ${sent.length} messages`);

      expect(byKey(received)).toEqual(byKey(sent));
    } finally {
      await Promise.all([consumer.disconnect(), producer.disconnect()]);
      await admin.deleteTopics({ topics: [topic] }).catch(() => {});
      await admin.disconnect();
    }
  }, 60_000);
});

interface Message {
  key: string;
  value: string;
  headers: Record<string, string>;
}

/** The messages of each key, in the order given. */
function byKey(messages: Message[]): Map<string, Message[]> {
  const groups = new Map<string, Message[]>();
  for (const message of messages) groups.set(message.key, [...(groups.get(message.key) ?? []), message]);
  return groups;
}

describe('startKafkaBroker', () => {
  it('leaves no broker process behind once stopped', async () => {
    const kafka = await startKafkaBroker({ cacheDir: CACHE_DIR, logger: testLogger('kafka-broker-test') });
    const aliveBefore = isAlive(kafka.pid);
    await kafka.stop();
    expect({ aliveBefore, aliveAfter: isAlive(kafka.pid) }).toEqual({ aliveBefore: true, aliveAfter: false });
  }, 120_000);

  it('stops the broker when the process that started it is killed with SIGKILL', async () => {
    const moduleUrl = (file: string) => JSON.stringify(new URL(file, import.meta.url).href);
    const starter = `
      const { startKafkaBroker } = await import(${moduleUrl('kafka-broker.ts')});
      const { testLogger } = await import(${moduleUrl('logger.ts')});
      const kafka = await startKafkaBroker({ cacheDir: ${JSON.stringify(CACHE_DIR)}, logger: testLogger() });
      console.log('broker pid ' + kafka.pid);
    `;
    const starterProcess = spawn(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', starter],
      {
        cwd: REPO_ROOT,
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const exited = new Promise((resolve) => starterProcess.once('exit', resolve));
    let pid = NaN;
    for await (const line of createInterface({ input: starterProcess.stdout })) {
      const match = /^broker pid (\d+)$/.exec(line);
      if (match) {
        pid = Number(match[1]);
        break;
      }
    }
    if (!(pid > 0)) throw new Error('the starter process ended without starting a broker');
    try {
      expect(isAlive(pid)).toBe(true);
      starterProcess.kill('SIGKILL');
      await exited;
      expect(await gone(pid, 20_000)).toBe(true);
    } finally {
      // Not to leave a broker behind when the lifeline failed.
      if (isAlive(pid)) process.kill(pid, 'SIGKILL');
    }
  }, 120_000);
});

describe('startKafkaCluster', () => {
  const PER_PHASE = 10;

  it("advertises the clients' listener at the address given, and its own listener to the rest", async () => {
    // A forwarder in front of the clients' listener, as the chaos run's Toxiproxy proxies are.
    let upstream = '';
    const connections: string[] = [];
    const forwarder = createServer((socket) => {
      const [host, port] = upstream.split(':');
      const to = createConnection({ host: host!, port: Number(port) });
      connections.push(upstream);
      socket.pipe(to).pipe(socket);
      for (const end of [socket, to]) end.on('error', () => (socket.destroy(), to.destroy()));
    });
    const forwarded = `127.0.0.1:${await freePort()}`;
    await new Promise<void>((resolve) =>
      forwarder.listen(Number(forwarded.split(':')[1]), '127.0.0.1', resolve),
    );
    const cluster = await startKafkaCluster({
      cacheDir: CACHE_DIR,
      logger: testLogger('kafka-cluster-test'),
      nodes: 1,
      advertiseClientListener: (id, listener) => {
        upstream = listener;
        return Promise.resolve(id === 1 ? forwarded : 'unexpected:1');
      },
    });
    // What a broker answers a metadata request with: the addresses of the listener asked.
    const brokersSeenFrom = (bootstrap: string) =>
      new Promise<string[]>((resolve, reject) => {
        const producer = new confluent.Producer({ 'metadata.broker.list': bootstrap });
        producer.connect({ timeout: 30_000 }, (error, metadata) => {
          producer.disconnect();
          if (error) reject(new Error(error.message, { cause: error }));
          else resolve(metadata.brokers.map(({ host, port }) => `${host}:${port}`));
        });
      });
    try {
      expect({
        clientBrokers: cluster.clientBrokers,
        throughTheForwarder: await brokersSeenFrom(forwarded),
        throughItsOwnListener: await brokersSeenFrom(cluster.brokers[0]!),
      }).toEqual({
        clientBrokers: [forwarded],
        throughTheForwarder: [forwarded],
        throughItsOwnListener: cluster.brokers,
      });
      expect(connections.length).toBeGreaterThan(0);
      expect(upstream).not.toBe(cluster.brokers[0]);
    } finally {
      await cluster.stop();
      forwarder.close();
    }
  }, 120_000);

  it('keeps taking writes with acks=all while the leader is killed, and takes the node back with its data', async () => {
    const cluster = await startKafkaCluster({
      cacheDir: CACHE_DIR,
      logger: testLogger('kafka-cluster-test'),
      nodes: 3,
    });
    const pids = cluster.nodes.map((node) => node.pid()!);
    // The cluster's folder, from a broker's last argument: <folder>/node-<id>/server.properties.
    const folder = dirname(dirname(readFileSync(`/proc/${pids[0]}/cmdline`, 'utf8').split('\0').at(-2)!));
    // A killed leader is replaced once the controller fences it (9 s without heartbeats, by default):
    // librdkafka keeps each message until then, and sends it to the new leader.
    const kafka = new Kafka(kafkaClientConfig(cluster.brokers, 'kafka-cluster-test'));
    const topic = `kafka-cluster-test-${randomUUID()}`;
    const admin = kafka.admin();
    const producer = kafka.producer({ kafkaJS: { idempotent: true, acks: -1 }, 'linger.ms': 0 });
    const consumer = kafka.consumer({
      kafkaJS: { groupId: `kafka-cluster-test-${randomUUID()}`, fromBeginning: true },
    });
    const sent: string[] = [];
    const send = async (phase: string) => {
      for (let i = 0; i < PER_PHASE; i++) {
        const value = `${phase}-${i}`;
        await producer.send({ topic, messages: [{ value }] });
        sent.push(value);
      }
    };
    try {
      expect({ folder: existsSync(folder), all: cluster.nodes.every((node) => node.running()) }).toEqual({
        folder: true,
        all: true,
      });
      await admin.connect();
      await admin.createTopics({ topics: [{ topic, numPartitions: 1, replicationFactor: 3 }] });
      await ledWithin(admin, topic, 30_000);
      await producer.connect();
      await send('before');

      const { leader } = await partition(kafka, topic);
      const victim = cluster.nodes.find((node) => node.id === leader)!;
      await victim.kill();
      expect({ running: victim.running(), alive: isAlive(pids[leader - 1]!) }).toEqual({
        running: false,
        alive: false,
      });
      await send('while-killed');
      const others = cluster.nodes.filter((node) => node !== victim).map((node) => node.id);
      expect([...(await partition(kafka, topic)).isr].sort()).toEqual(others);

      await victim.restart();
      pids.push(victim.pid()!);
      const restarted = Date.now();
      const deadline = restarted + 60_000;
      while ((await partition(kafka, topic)).isr.length < 3) {
        if (Date.now() > deadline) throw new Error('the restarted node did not rejoin the ISR within 60 s');
        await sleep(250);
      }
      testLogger('kafka-cluster-test').info({ ms: Date.now() - restarted }, 'the restarted node is in sync');
      await send('after');

      const received: string[] = [];
      await consumer.connect();
      await consumer.subscribe({ topics: [topic] });
      const allReceived = new Promise<void>((resolve) => {
        void consumer.run({
          eachMessage: ({ message }) => {
            received.push(message.value!.toString());
            if (received.length === sent.length) resolve();
            return Promise.resolve();
          },
        });
      });
      await within(allReceived, 60_000, () => `received ${received.length} of ${sent.length} messages`);
      // Exactly once: the log holds as many records as were sent, no retried duplicates.
      // The client's 5 s default for the metadata it reads first is short on a loaded machine.
      const [offsets] = await askCluster(kafka, (asked) =>
        asked.fetchTopicOffsets(topic, { timeout: 30_000, isolationLevel: IsolationLevel.READ_UNCOMMITTED }),
      );
      expect({ received, high: offsets?.high }).toEqual({ received: sent, high: String(sent.length) });
    } finally {
      await Promise.all([consumer.disconnect(), producer.disconnect()]);
      await admin.disconnect();
      await cluster.stop();
    }
    expect({ folder: existsSync(folder), alive: pids.filter(isAlive) }).toEqual({ folder: false, alive: [] });
  }, 180_000);
});

/**
 * `ask` of a fresh admin client, asked again for up to 30 s. Right after a broker is killed or comes
 * back, a request may go to a connection that is gone and time out (5 s, the client's default), and a
 * long-lived admin client kept timing out so for 30 s in one CI run on a quiet machine: each attempt
 * connects anew from every broker's address, as a client of a cluster in a fault would.
 */
async function askCluster<T>(kafka: KafkaJS.Kafka, ask: (admin: KafkaJS.Admin) => Promise<T>): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const admin = kafka.admin();
    try {
      await admin.connect();
      return await ask(admin);
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await sleep(250);
    } finally {
      await admin.disconnect().catch(() => {});
    }
  }
}

/** The topic's only partition as the cluster describes it now. */
async function partition(kafka: KafkaJS.Kafka, topic: string): Promise<KafkaJS.PartitionMetadata> {
  return askCluster(
    kafka,
    async (admin) => (await admin.fetchTopicMetadata({ topics: [topic] }))[0]!.partitions[0]!,
  );
}
