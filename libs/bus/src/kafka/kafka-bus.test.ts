import { createLogger } from '@ofp/runtime';
import { CONSUMER_PREFETCH, KafkaBus } from './kafka-bus.js';
import { ErrorCodes, type Kafka } from './kafka-javascript.js';

/**
 * A stand-in for the part of the client the bus drives: consumers that join at once and are handed
 * nothing (as one of confluent-kafka-javascript#476 is), and an admin that says how far behind the
 * group's partitions are. The real client is exercised by the integration tests.
 */
function fakeKafka(behind: () => number) {
  const consumers: { config: Record<string, unknown>; disconnected: boolean }[] = [];
  const kafka = {
    admin: () => ({
      connect: () => Promise.resolve(),
      disconnect: () => Promise.resolve(),
      listTopics: () => Promise.resolve(['ofp.events.people']),
      fetchTopicMetadata: () => Promise.resolve([{ name: 'ofp.events.people', partitions: [{ leader: 1 }] }]),
      fetchTopicOffsets: () => Promise.resolve([{ partition: 0, high: String(10 + behind()), low: '0' }]),
    }),
    consumer: (config: Record<string, unknown>) => {
      const state = { config, disconnected: false };
      consumers.push(state);
      return {
        connect: () => Promise.resolve(),
        subscribe: () => Promise.resolve(),
        run: () => {
          const rebalance = config.rebalance_cb as (error: { code: number }, assignment: unknown[]) => void;
          setImmediate(() =>
            rebalance({ code: ErrorCodes.ERR__ASSIGN_PARTITIONS }, [
              { topic: 'ofp.events.people', partition: 0 },
            ]),
          );
          return Promise.resolve();
        },
        assignment: () => [{ topic: 'ofp.events.people', partition: 0 }],
        committed: () => Promise.resolve([{ topic: 'ofp.events.people', partition: 0, offset: '10' }]),
        disconnect: () => {
          state.disconnected = true;
          return Promise.resolve();
        },
      };
    },
  };
  return { kafka: kafka as unknown as Kafka, consumers };
}

const settle = async (check: () => boolean, ms = 5_000): Promise<void> => {
  for (let waited = 0; !check() && waited < ms; waited += 20) await new Promise((r) => setTimeout(r, 20));
};

describe('KafkaBus', () => {
  const logger = createLogger({ name: 'test', level: 'silent' });
  const topics = { prefix: 'ofp.events.', partitions: 6, replicationFactor: 1, create: true };

  it('gives its consumers the session, static membership in durable groups, a batch size and bounded prefetch', async () => {
    const { kafka, consumers } = fakeKafka(() => 0);
    const bus = new KafkaBus(kafka, logger, {
      topics,
      batchSize: 50,
      sessionTimeoutMs: 10_000,
      instanceId: 'projector-0',
    });
    const durable = await bus.subscribe({
      group: 'projector',
      streamTypes: ['people'],
      handle: async () => {},
    });
    const transient = await bus.subscribe({
      group: 'revocations',
      streamTypes: ['people'],
      transient: true,
      handle: async () => {},
    });
    const { rebalance_cb: _, ...config } = consumers[0]!.config;
    expect(config).toEqual({
      kafkaJS: {
        groupId: 'projector',
        fromBeginning: true,
        autoCommit: true,
        autoCommitInterval: 1_000,
        allowAutoTopicCreation: false,
        sessionTimeout: 10_000,
        heartbeatInterval: 1_000,
        rebalanceTimeout: 60_000,
      },
      'js.consumer.max.batch.size': 50,
      ...CONSUMER_PREFETCH,
      'topic.metadata.refresh.interval.ms': 10_000,
      'group.instance.id': 'projector-0',
    });
    // A transient group's only member is this process's consumer: no instance id to keep.
    expect(consumers[1]!.config['group.instance.id']).toBeUndefined();
    expect(bus.throughput().map(({ group, assignments }) => ({ group, assignments }))).toEqual([
      { group: 'projector', assignments: 1 },
      { group: 'revocations', assignments: 1 },
    ]);
    await Promise.all([durable.stop(), transient.stop()]);
  });

  it('starts a consumer again when its partitions are behind and it was handed nothing for the stall timeout', async () => {
    let lag = 0;
    const { kafka, consumers } = fakeKafka(() => lag);
    const bus = new KafkaBus(kafka, logger, { topics, batchSize: 10, stallTimeoutMs: 200 });
    const subscription = await bus.subscribe({
      group: 'projector',
      streamTypes: ['people'],
      handle: async () => {},
    });
    // Caught up: quiet is no stall.
    await new Promise((r) => setTimeout(r, 600));
    expect(consumers).toHaveLength(1);
    lag = 5;
    // Until the new consumer has its partitions: it is made before it joins, and on a loaded machine
    // a look at the counts can come between the two.
    await settle(() => (bus.throughput()[0]?.assignments ?? 0) === 2);
    expect(consumers.map(({ disconnected }) => disconnected)).toEqual([true, false]);
    expect(bus.throughput()[0]).toMatchObject({
      group: 'projector',
      restarts: 1,
      assignments: 2,
      stalled: { 'ofp.events.people': 1 },
    });
    await subscription.stop();
    expect(consumers[1]!.disconnected).toBe(true);
    await bus.close();
  });
});
