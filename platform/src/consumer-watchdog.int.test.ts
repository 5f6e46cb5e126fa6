// @runs-alone: a stalled consumer started again within its bound, timed
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { Registry } from 'prom-client';
import {
  Kafka,
  KafkaBus,
  kafkaClientConfig,
  toKafkaMessage,
  topicOf,
  type Consumer,
  type Producer,
  type Subscription,
} from '@ofp/bus';
import { testLogger, testTopics, thingEvent, until } from '@ofp/testing';
import { registerFlowMetrics } from './observability.js';

const STALL_TIMEOUT_MS = 4_000;
/** How often the watchdog looks (kafka-bus.ts: a quarter of the stall timeout, at most 10 s). */
const WATCHDOG_INTERVAL_MS = STALL_TIMEOUT_MS / 4;
/** What a loaded machine adds: reading the lag (two requests of at most 10 s each) and a late timer. */
const LOAD_SLACK_MS = 10_000;

/** The Kafka client, with every consumer it makes kept for the test: real consumers, not stand-ins. */
class WatchedKafka extends Kafka {
  readonly consumers: Consumer[] = [];
  override consumer(...args: Parameters<Kafka['consumer']>): Consumer {
    const consumer = super.consumer(...args);
    this.consumers.push(consumer);
    return consumer;
  }
}

/**
 * A bus on the test brokers whose group is named after `name`: its consumers kept, its flow metrics in
 * a registry of its own, the stall timeout of these tests.
 */
function watchedBus(name: string, options: Partial<ConstructorParameters<typeof KafkaBus>[2]> = {}) {
  const kafka = new WatchedKafka(
    kafkaClientConfig((process.env.KAFKA_BROKERS ?? '').split(',').filter(Boolean), `${name}-test`),
  );
  const topics = testTopics(2);
  const group = `${name}-${randomUUID()}`;
  const bus = new KafkaBus(kafka, testLogger(name), {
    topics,
    batchSize: 100,
    stallTimeoutMs: STALL_TIMEOUT_MS,
    ...options,
  });
  const registry = new Registry();
  registerFlowMetrics(registry, bus);
  return { kafka, topics, group, bus, registry };
}

/**
 * Waits for the consumer the watchdog starts in place of `stalled`: the restart is counted before the
 * old consumer has left (which can take seconds on a loaded machine) and the new one is made.
 */
async function startedAgain(kafka: WatchedKafka, stalled: Consumer): Promise<void> {
  await until(
    'the consumer started again',
    30_000,
    () => kafka.consumers.at(-1),
    (current) => current !== stalled,
  );
}

/** `group`'s sample of a metric, as a scrape reads it. */
async function groupSample(registry: Registry, group: string, name: string): Promise<number> {
  const metric = await registry.getSingleMetric(name)!.get();
  return metric.values.find((value) => value.labels.group === group)?.value ?? 0;
}

/** Sends `count` events named after `name` to the topic of `streamType` (things): their event ids. */
async function sendThings(
  producer: Producer,
  topics: ReturnType<typeof testTopics>,
  name: string,
  count: number,
  streamType = 'things',
): Promise<string[]> {
  const events = Array.from({ length: count }, (_, i) => ({ ...thingEvent(`${name}-${i}`, i), streamType }));
  await producer.send({
    topic: topicOf(topics, streamType),
    messages: events.map((event) => toKafkaMessage(event, 'urn:ofp:schema:things:1')),
  });
  return events.map((event) => event.eventId);
}

// The watchdog for confluentinc/confluent-kafka-javascript#476 (a consumer that stops calling its
// handler): a consumer whose partitions have events it is not handed is found within the stall
// timeout, counted in bus_consumer_restarts_total (what the alert OfpConsumerStalled reads) and started
// again; the new consumer handles what waited, the lag goes back to 0 and the count stops there. The
// stall is the real consumer's own: its partitions paused, as the KafkaJS layer's stall leaves them
// fetched-from but never handed over.
describe('the Kafka consumer watchdog', () => {
  const { kafka, topics, group, bus, registry } = watchedBus('consumer-watchdog');
  let subscription: Subscription | undefined;
  let producer: Producer | undefined;
  afterAll(async () => {
    await subscription?.stop();
    await bus.close();
    await producer?.disconnect();
  });

  const sample = (name: string): Promise<number> => groupSample(registry, group, name);
  const send = (name: string, count: number): Promise<string[]> => sendThings(producer!, topics, name, count);

  it('starts a consumer that stalls while behind again within its bound, and counts it once', async () => {
    const handled = new Set<string>();
    let handedAt = Date.now();
    subscription = await bus.subscribe({
      group,
      streamTypes: ['things'],
      handle: async (events) => {
        handedAt = Date.now();
        for (const event of events) handled.add(event.eventId);
      },
    });
    producer = kafka.producer({ kafkaJS: { idempotent: true, acks: -1 }, 'linger.ms': 0 });
    await producer.connect();
    const allHandled = (ids: string[]) => async () => ids.filter((id) => !handled.has(id)).length;

    const before = await send('before', 10);
    await until('the events before the stall handled', 30_000, allHandled(before), (left) => left === 0);
    // Counted from here: on a loaded machine a new consumer's first fetch can outlast this short timeout.
    const restartsBefore = await sample('bus_consumer_restarts_total');

    // The stall: the consumer keeps its partitions and is handed nothing while events wait.
    const stalled = kafka.consumers.at(-1)!;
    stalled.pause([{ topic: topicOf(topics, 'things') }]);
    const lastHanded = handedAt;
    const waiting = await send('waiting', 10);
    const stalledAt = Date.now();
    // While it stalls, the lag shows it (events behind, and for how long).
    await until(
      'the lag showing the stall',
      10_000,
      () => sample('bus_consumer_lag_events'),
      (events) => events > 0,
    );

    await until(
      'the watchdog counting the stall',
      STALL_TIMEOUT_MS + WATCHDOG_INTERVAL_MS + LOAD_SLACK_MS,
      () => sample('bus_consumer_restarts_total'),
      (restarts) => restarts > restartsBefore,
    );
    const foundAfterMs = Date.now() - lastHanded;
    expect(foundAfterMs).toBeGreaterThanOrEqual(STALL_TIMEOUT_MS);
    await startedAgain(kafka, stalled);

    // The consumer started again handles what waited, and the lag goes back to 0.
    await until(
      'the waiting events handled after the restart',
      30_000,
      allHandled(waiting),
      (left) => left === 0,
    );
    const movedAfterMs = Date.now() - stalledAt;
    await until(
      'the lag back to 0',
      15_000,
      async () => [await sample('bus_consumer_lag_events'), await sample('bus_consumer_lag_seconds')],
      ([events, seconds]) => events === 0 && seconds === 0,
    );

    // A consumer with nothing to read is not a stalled one: after twice the stall timeout with nothing
    // to read, the count has moved by the one stall.
    await sleep(2 * STALL_TIMEOUT_MS + WATCHDOG_INTERVAL_MS);
    const after = await send('after', 5);
    await until('the events after the restart handled', 30_000, allHandled(after), (left) => left === 0);
    expect(await sample('bus_consumer_restarts_total')).toBe(restartsBefore + 1);
    process.stdout.write(
      `the watchdog counted the stall ${foundAfterMs} ms after the last batch (bound ${STALL_TIMEOUT_MS} ms); the waiting events were handled ${movedAfterMs} ms after the stall\n`,
    );
  }, 120_000);
});

// A consumer can also stall with no partitions at all while its group is behind: fenced by another
// consumer that joined under its static member's name (KIP-345: the coordinator keeps the newest), a
// consumer keeps running with no assignment, and when that other one is gone nobody reads the group's
// partitions. Such a consumer is behind by its group's whole lag once the group's commits have not
// moved for the stall timeout; started again, it joins as the same member and takes the partitions.
describe('the Kafka consumer watchdog, for a consumer left with no partitions', () => {
  const SESSION_TIMEOUT_MS = 6_000;
  const instanceId = `replica-${randomUUID()}`;
  const { kafka, topics, group, bus, registry } = watchedBus('consumer-watchdog-unassigned', {
    sessionTimeoutMs: SESSION_TIMEOUT_MS,
    instanceId,
  });
  let subscription: Subscription | undefined;
  let producer: Producer | undefined;
  let impostor: Consumer | undefined;
  afterAll(async () => {
    await impostor?.disconnect().catch(() => {});
    await subscription?.stop();
    await bus.close();
    await producer?.disconnect();
  });

  const sample = (name: string): Promise<number> => groupSample(registry, group, name);
  const send = (name: string, count: number): Promise<string[]> => sendThings(producer!, topics, name, count);

  it('starts a consumer fenced out of its partitions again once its group is stuck behind', async () => {
    const handled = new Set<string>();
    subscription = await bus.subscribe({
      group,
      streamTypes: ['things'],
      handle: async (events) => {
        for (const event of events) handled.add(event.eventId);
      },
    });
    producer = kafka.producer({ kafkaJS: { idempotent: true, acks: -1 }, 'linger.ms': 0 });
    await producer.connect();
    const allHandled = (ids: string[]) => async () => ids.filter((id) => !handled.has(id)).length;
    const before = await send('before', 10);
    await until('the events before the fence handled', 30_000, allHandled(before), (left) => left === 0);
    const restartsBefore = await sample('bus_consumer_restarts_total');
    const fenced = kafka.consumers.at(-1)!;

    // Another consumer joins under the same static member's name and takes the partitions; then it
    // goes, without leaving (a static member does not), so the group is empty once its session ends.
    impostor = kafka.consumer({
      kafkaJS: { groupId: group, sessionTimeout: SESSION_TIMEOUT_MS },
      'group.instance.id': instanceId,
    });
    await impostor.connect();
    await impostor.subscribe({ topics: [topicOf(topics, 'things')] });
    await impostor.run({ eachBatch: async () => {} });
    await until(
      'the other consumer holding the partitions',
      30_000,
      async () => impostor!.assignment().length,
      (partitions) => partitions === 2,
    );
    await impostor.disconnect();
    impostor = undefined;
    const waiting = await send('waiting', 10);
    const fencedAt = Date.now();
    await until(
      'the fenced consumer with no partitions',
      30_000,
      async () => fenced.assignment().length,
      (partitions) => partitions === 0,
    );

    await until(
      'the watchdog counting the stall',
      SESSION_TIMEOUT_MS + 2 * (STALL_TIMEOUT_MS + WATCHDOG_INTERVAL_MS) + LOAD_SLACK_MS,
      () => sample('bus_consumer_restarts_total'),
      (restarts) => restarts > restartsBefore,
    );
    await startedAgain(kafka, fenced);
    await until(
      'the waiting events handled after the restart',
      30_000,
      allHandled(waiting),
      (left) => left === 0,
    );
    process.stdout.write(
      `a fenced consumer with no partitions was started again and its group's waiting events handled ${Date.now() - fencedAt} ms after they were sent\n`,
    );
  }, 120_000);
});

// The projector is one consumer group over every topic it projects: a consumer can be handed the
// batches of one topic while the partitions of another are never fetched (one that met "Unknown topic
// or partition" at start-up, say). The watchdog judges each partition on its own, so the topic that
// moves does not hide the one that does not: here the things topic stalls (its partitions paused on
// the real consumer) while gadgets events keep coming and being handled; the watchdog starts the
// consumer again, names the things topic in bus_consumer_stalled_partitions_total, and what waited on
// it is handled. Judged by the last batch handed on any partition, it never restarts (the test fails).
describe('the Kafka consumer watchdog, for one topic of a group that stalls while another moves', () => {
  const { kafka, topics, group, bus, registry } = watchedBus('consumer-watchdog-topic');
  let subscription: Subscription | undefined;
  let producer: Producer | undefined;
  afterAll(async () => {
    await subscription?.stop();
    await bus.close();
    await producer?.disconnect();
  });

  /** The watchdog's count of stalled partitions of `streamType`'s topic, as a scrape reads it. */
  const stalledPartitions = async (streamType: string): Promise<number> => {
    const metric = await registry.getSingleMetric('bus_consumer_stalled_partitions_total')!.get();
    const topic = topicOf(topics, streamType);
    return metric.values.find(({ labels }) => labels.group === group && labels.topic === topic)?.value ?? 0;
  };

  it('starts a consumer again when one of its topics stalls while another keeps being handled', async () => {
    const handled = new Set<string>();
    subscription = await bus.subscribe({
      group,
      streamTypes: ['things', 'gadgets'],
      handle: async (events) => {
        for (const event of events) handled.add(event.eventId);
      },
    });
    producer = kafka.producer({ kafkaJS: { idempotent: true, acks: -1 }, 'linger.ms': 0 });
    await producer.connect();
    const allHandled = (ids: string[]) => async () => ids.filter((id) => !handled.has(id)).length;
    const send = (name: string, count: number, streamType?: string): Promise<string[]> =>
      sendThings(producer!, topics, name, count, streamType);

    const before = [...(await send('before', 10)), ...(await send('before-gadgets', 10, 'gadgets'))];
    await until('the events before the stall handled', 30_000, allHandled(before), (left) => left === 0);
    const restartsBefore = await groupSample(registry, group, 'bus_consumer_restarts_total');

    // The things topic stalls on the consumer, which keeps its partitions; gadgets keep moving.
    const stalled = kafka.consumers.at(-1)!;
    stalled.pause([{ topic: topicOf(topics, 'things') }]);
    const waiting = await send('waiting', 10);
    const stalledAt = Date.now();
    let moving = true;
    const gadgetsHandled: number[] = [];
    const gadgets = (async () => {
      for (let round = 0; moving; round++) {
        const ids = await send(`gadgets-${round}`, 2, 'gadgets');
        await until(`gadgets round ${round} handled`, 30_000, allHandled(ids), (left) => left === 0);
        gadgetsHandled.push(Date.now());
        await sleep(250);
      }
    })();
    try {
      await until(
        'the watchdog counting the stall',
        STALL_TIMEOUT_MS + WATCHDOG_INTERVAL_MS + LOAD_SLACK_MS,
        () => groupSample(registry, group, 'bus_consumer_restarts_total'),
        (restarts) => restarts > restartsBefore,
      );
    } finally {
      moving = false;
      await gadgets;
    }
    const foundAfterMs = Date.now() - stalledAt;
    // The other topic was handled all along, until the restart: it was the things topic that stalled.
    expect(gadgetsHandled.filter((at) => at - stalledAt >= STALL_TIMEOUT_MS / 2).length).toBeGreaterThan(0);
    await startedAgain(kafka, stalled);
    expect(await stalledPartitions('things')).toBeGreaterThan(0);
    expect(await stalledPartitions('gadgets')).toBe(0);

    // The consumer started again handles what waited on the stalled topic.
    await until(
      'the waiting events handled after the restart',
      30_000,
      allHandled(waiting),
      (left) => left === 0,
    );
    process.stdout.write(
      `one topic of two stalled while the other moved (${gadgetsHandled.length} rounds handled): the watchdog started the consumer again ${foundAfterMs} ms after the stall (bound ${STALL_TIMEOUT_MS} ms); the waiting events were handled ${Date.now() - stalledAt} ms after it\n`,
    );
  }, 120_000);
});
