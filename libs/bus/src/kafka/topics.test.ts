import { createLogger } from '@ofp/runtime';
import type { Kafka } from './kafka-javascript.js';
import { ensureTopics, topicOf } from './topics.js';

describe('ensureTopics', () => {
  it('does not wait for a replica on a broker the cluster does not list', async () => {
    // librdkafka names a replica on a broker missing from the metadata (down and fenced) without an
    // address; a chaos run's api waited 30 s for ":0" while broker 3 was down (seed 24240007).
    const settings = { prefix: 'ofp.', partitions: 1, replicationFactor: 3, create: true };
    const topic = topicOf(settings, 'people');
    const asked: string[] = [];
    const replicaNodes = [
      { id: 1, host: '127.0.0.1', port: 9092 },
      { id: 2, host: '127.0.0.1', port: 9093 },
      { id: 3, host: '', port: 0 },
    ];
    const kafka = {
      admin: (config?: Record<string, string>) => ({
        connect: () => Promise.resolve(),
        disconnect: () => Promise.resolve(),
        listTopics: () => Promise.resolve([topic]),
        fetchTopicMetadata: () => {
          if (config) asked.push(config['bootstrap.servers']!);
          // The broker without an address answers nothing, as a client bootstrapped at ":0" does not.
          if (config?.['bootstrap.servers'] === ':0') return Promise.reject(new Error('no answer'));
          return Promise.resolve([
            { name: topic, partitions: [{ partitionId: 0, leader: 1, replicas: [1, 2, 3], replicaNodes }] },
          ]);
        },
      }),
    } as unknown as Kafka;
    const started = Date.now();
    await ensureTopics(kafka, settings, [topic], createLogger({ name: 'test', level: 'silent' }));
    expect({ asked: [...new Set(asked)].sort(), quick: Date.now() - started < 5_000 }).toEqual({
      asked: ['127.0.0.1:9092', '127.0.0.1:9093'],
      quick: true,
    });
  });
});
