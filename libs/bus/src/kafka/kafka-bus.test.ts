import type { Kafka } from 'kafkajs';
import { createLogger } from '@ofp/runtime';
import { KafkaBus } from './kafka-bus.js';

/**
 * A stand-in for the part of kafkajs the bus drives, to make a consumer crash the way kafkajs reports
 * it (the CRASH event) on demand. Whether a real consumer crashes so is kafkajs's to decide: it
 * restarts one whose error is retriable and leaves any other stopped.
 */
function fakeKafka() {
  const consumers: {
    config: unknown;
    crash: (restart: boolean) => void;
    ran: boolean;
    disconnected: boolean;
  }[] = [];
  const kafka = {
    admin: () => ({
      connect: () => Promise.resolve(),
      disconnect: () => Promise.resolve(),
      listTopics: () => Promise.resolve(['ofp.events.people']),
      fetchTopicMetadata: () =>
        Promise.resolve({ topics: [{ name: 'ofp.events.people', partitions: [{ leader: 1 }] }] }),
    }),
    consumer: (config: unknown) => {
      const listeners = new Map<string, (event: unknown) => void>();
      const state = {
        config,
        ran: false,
        disconnected: false,
        crash: (restart: boolean) =>
          listeners.get('consumer.crash')?.({ payload: { restart, error: new Error('not retriable') } }),
      };
      consumers.push(state);
      return {
        events: { CRASH: 'consumer.crash', GROUP_JOIN: 'consumer.group_join' },
        on: (event: string, listener: (event: unknown) => void) => {
          listeners.set(event, listener);
          if (event === 'consumer.group_join') setImmediate(() => listener({}));
          return () => listeners.delete(event);
        },
        connect: () => Promise.resolve(),
        subscribe: () => Promise.resolve(),
        run: () => {
          state.ran = true;
          return Promise.resolve();
        },
        disconnect: () => {
          state.disconnected = true;
          return Promise.resolve();
        },
      };
    },
  };
  return { kafka: kafka as unknown as Kafka, consumers };
}

const settle = async (check: () => boolean): Promise<void> => {
  for (let waited = 0; !check() && waited < 5_000; waited += 20) await new Promise((r) => setTimeout(r, 20));
};

describe('KafkaBus', () => {
  const logger = createLogger({ name: 'test', level: 'silent' });
  const topics = { prefix: 'ofp.events.', partitions: 6, replicationFactor: 1, create: true };
  const subscribed = async (sessionTimeoutMs?: number) => {
    const { kafka, consumers } = fakeKafka();
    const bus = new KafkaBus(kafka, logger, {
      topics,
      batchSize: 10,
      ...(sessionTimeoutMs ? { sessionTimeoutMs } : {}),
    });
    const subscription = await bus.subscribe({
      group: 'projector',
      streamTypes: ['people'],
      handle: () => Promise.resolve(),
    });
    return { consumers, subscription };
  };

  it('starts a consumer again, of the same group, when kafkajs leaves it stopped after a crash', async () => {
    const { consumers, subscription } = await subscribed();
    consumers[0]!.crash(false);
    await settle(() => consumers.length === 2 && consumers[1]!.ran);
    expect(consumers.map(({ ran, disconnected }) => ({ ran, disconnected }))).toEqual([
      { ran: true, disconnected: true },
      { ran: true, disconnected: false },
    ]);
    await subscription.stop();
    expect(consumers[1]!.disconnected).toBe(true);
  });

  it('leaves a consumer that kafkajs restarts itself alone', async () => {
    const { consumers, subscription } = await subscribed();
    consumers[0]!.crash(true);
    await new Promise((r) => setTimeout(r, 500));
    expect(consumers).toHaveLength(1);
    await subscription.stop();
  });

  it('gives its consumers the session timeout, heartbeating ten times per session', async () => {
    const { consumers, subscription } = await subscribed(10_000);
    expect(consumers[0]!.config).toEqual({
      groupId: 'projector',
      allowAutoTopicCreation: false,
      sessionTimeout: 10_000,
      heartbeatInterval: 1_000,
      rebalanceTimeout: 60_000,
    });
    await subscription.stop();
  });
});
