import { createLogger } from '@ofp/runtime';
import type { Kafka, RdKafkaMetadata } from './kafka-javascript.js';
import { answeredBy, ensureTopics, topicOf } from './topics.js';

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
      admin: () => ({
        connect: () => Promise.resolve(),
        disconnect: () => Promise.resolve(),
        listTopics: () => Promise.resolve([topic]),
        fetchTopicMetadata: () =>
          Promise.resolve([
            { name: topic, partitions: [{ partitionId: 0, leader: 1, replicas: [1, 2, 3], replicaNodes }] },
          ]),
      }),
      // The probe of each broker (metadataOf): a client bootstrapped at that address alone.
      producer: (config: Record<string, string>) => {
        const broker = config['bootstrap.servers']!;
        asked.push(broker);
        return {
          // The broker without an address answers nothing, as a client bootstrapped at ":0" does not.
          connect: () => (broker === ':0' ? Promise.reject(new Error('no answer')) : Promise.resolve()),
          disconnect: () => Promise.resolve(),
          _getInternalClient: () => ({
            getMetadata: (_: unknown, callback: (error: null, metadata: RdKafkaMetadata) => void) =>
              callback(null, {
                orig_broker_id: -1,
                orig_broker_name: `${broker}/bootstrap`,
                brokers: [],
                topics: [{ name: topic, partitions: [{ id: 0, leader: 1, replicas: [1, 2, 3], isrs: [1] }] }],
              }),
          }),
        };
      },
    } as unknown as Kafka;
    const started = Date.now();
    await ensureTopics(kafka, settings, [topic], createLogger({ name: 'test', level: 'silent' }));
    expect({ asked: [...new Set(asked)].sort(), quick: Date.now() - started < 5_000 }).toEqual({
      asked: ['127.0.0.1:9092', '127.0.0.1:9093'],
      quick: true,
    });
  });

  it('names the broker that sent a metadata answer as librdkafka names its connection', () => {
    expect(answeredBy('127.0.0.1:9092/bootstrap')).toBe('bootstrap');
    expect(answeredBy('127.0.0.1:9093/2')).toBe('127.0.0.1:9093');
    expect(answeredBy('sasl_ssl://kafka-1.kafka:9093/1')).toBe('kafka-1.kafka:9093');
  });
});
