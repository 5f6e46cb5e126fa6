// @runs-alone: a restarted member takes its partitions back within the session timeout, timed
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { testLogger, testTopics, thingEvent, until } from '@ofp/testing';
import type { Subscription } from '../bus.js';
import { toKafkaMessage } from './cloudevents.js';
import { KafkaBus } from './kafka-bus.js';
import { kafkaClientConfig } from './client.js';
import { Kafka, type Producer } from './kafka-javascript.js';
import { topicOf } from './topics.js';

const FIXTURE = fileURLToPath(new URL('./consumer-process.fixture.ts', import.meta.url));
const SESSION_TIMEOUT_MS = 30_000;
const PER_PHASE = 40;

/** A replica's consumer in a process of its own: `subscribed` once it has partitions; what it handled. */
interface Replica {
  readonly process: ChildProcess;
  readonly subscribed: Promise<void>;
  readonly handled: Set<string>;
}

// KIP-345: a replica that restarts (a pod replaced, a process killed) with the same group.instance.id
// within its session takes its partitions back as the same member. Without it, the group waits out
// the dead member's session and then rebalances twice (when it joins again, when the old member
// expires), every other replica of the group giving its partitions up each time.
describe('KafkaBus static membership', () => {
  const kafka = new Kafka(
    kafkaClientConfig((process.env.KAFKA_BROKERS ?? '').split(',').filter(Boolean), 'static-membership-test'),
  );
  const topics = testTopics(4);
  const group = `static-membership-${randomUUID()}`;
  const children: ChildProcess[] = [];
  let bus: KafkaBus | undefined;
  let subscription: Subscription | undefined;
  let producer: Producer | undefined;
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await subscription?.stop();
    await bus?.close();
    await producer?.disconnect();
  });

  function startReplica(instanceId: string): Replica {
    const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE], {
      env: {
        ...process.env,
        TOPIC_PREFIX: topics.prefix,
        GROUP: group,
        INSTANCE_ID: instanceId,
        SESSION_TIMEOUT_MS: String(SESSION_TIMEOUT_MS),
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(child);
    const handled = new Set<string>();
    const subscribed = new Promise<void>((resolve, reject) => {
      child.once('exit', (code, signal) => reject(new Error(`replica exited (${code ?? signal})`)));
      createInterface({ input: child.stdout }).on('line', (line) => {
        if (line === 'subscribed') resolve();
        else handled.add(line);
      });
    });
    subscribed.catch(() => {});
    return { process: child, subscribed, handled };
  }

  it('gives a replica killed and started again within its session its partitions back, with no rebalance of the others', async () => {
    bus = new KafkaBus(kafka, testLogger('static-membership'), {
      topics,
      batchSize: 100,
      sessionTimeoutMs: SESSION_TIMEOUT_MS,
      instanceId: 'replica-a',
    });
    const handledHere = new Set<string>();
    subscription = await bus.subscribe({
      group,
      streamTypes: ['things'],
      handle: async (events) => {
        for (const event of events) handledHere.add(event.eventId);
      },
    });
    const assignmentsHere = () => bus!.throughput().find((each) => each.group === group)?.assignments ?? 0;
    producer = kafka.producer({ kafkaJS: { idempotent: true, acks: -1 }, 'linger.ms': 0 });
    await producer.connect();

    /** Sends a phase's events, one record each (spread over the partitions by key); resolves once all are handled. */
    const phase = async (name: string, replica: Replica): Promise<void> => {
      const sent = Array.from({ length: PER_PHASE }, (_, i) => thingEvent(`${name}-${i}`, i));
      await producer!.send({
        topic: topicOf(topics, 'things'),
        messages: sent.map((event) => toKafkaMessage(event, 'urn:ofp:schema:things:1')),
      });
      const unhandled = () =>
        sent.filter((e) => !handledHere.has(e.eventId) && !replica.handled.has(e.eventId));
      await until(
        `${name}: every event handled`,
        60_000,
        () => unhandled().length,
        (left) => left === 0,
      );
    };

    const first = startReplica('replica-b');
    await first.subscribed;
    await phase('both', first);
    // Both replicas have partitions: each handled some of the phase's events.
    expect(first.handled.size).toBeGreaterThan(0);
    expect(handledHere.size).toBeLessThan(PER_PHASE);
    const assignedBefore = assignmentsHere();

    first.process.kill('SIGKILL');
    await new Promise((resolve) => first.process.once('exit', resolve));
    const restartedAt = Date.now();
    const second = startReplica('replica-b');
    await second.subscribed;
    const tookBackMs = Date.now() - restartedAt;
    await phase('after restart', second);
    // Within the session the group does not rebalance: this replica keeps its partitions, and the one
    // started again has its own back (it handles its share of the new events).
    expect(second.handled.size).toBeGreaterThan(0);
    expect(tookBackMs).toBeLessThan(SESSION_TIMEOUT_MS);
    expect(assignmentsHere()).toBe(assignedBefore);
    process.stdout.write(
      `the restarted replica had its partitions ${tookBackMs} ms after it was started again\n`,
    );
  }, 180_000);
});
