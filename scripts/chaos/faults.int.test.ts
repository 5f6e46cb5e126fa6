import { randomUUID } from 'node:crypto';
import { Kafka, logLevel, toKafkaMessage, topicOf, type Admin, type Consumer, type Producer } from '@ofp/bus';
import { createPool } from '@ofp/runtime';
import { thingEvent, until } from '@ofp/testing';
import { LagSampler } from './faults.js';

// The chaos run's lag counts what a durable group has not committed on the topics it reads. A group
// that has committed nothing yet reads from the beginning, so all of its topics' events count: the
// sampler once took a partition with no commit for one the group does not read, and read such a group's
// lag as 0 (a projector that never committed looked caught up in the run's table).
describe('the chaos run lag sampler', () => {
  const kafka = new Kafka({
    kafkaJS: {
      clientId: 'chaos-lag-sampler-test',
      brokers: (process.env.KAFKA_BROKERS ?? '').split(',').filter(Boolean),
      logLevel: logLevel.NOTHING,
    },
  });
  const prefix = `test.${randomUUID().slice(0, 8)}.`;
  const topic = topicOf({ prefix, partitions: 2, replicationFactor: 1, create: true }, 'things');
  const pool = createPool({
    connectionString: process.env.DATABASE_URL!,
    applicationName: 'lag-sampler-test',
    max: 1,
  });
  let admin: Admin | undefined;
  let producer: Producer | undefined;
  let consumer: Consumer | undefined;
  let sampler: LagSampler | undefined;
  afterAll(async () => {
    await sampler?.stop();
    await consumer?.disconnect();
    await producer?.disconnect();
    await admin?.disconnect();
    await pool.end();
  });

  it('counts every event of a group that has committed nothing', async () => {
    admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 2, replicationFactor: 1 }] });
    producer = kafka.producer({ kafkaJS: { idempotent: true, acks: -1 } });
    await producer.connect();
    const events = Array.from({ length: 6 }, (_, i) => thingEvent(`lag-${i}`, i));
    await producer.send({
      topic,
      messages: events.map((event) => toKafkaMessage(event, 'urn:ofp:schema:things:1')),
    });

    // A durable group (no UUID at the end of its name) that holds both partitions and commits nothing.
    consumer = kafka.consumer({
      kafkaJS: { groupId: `chaos-lag-test-${Date.now()}`, fromBeginning: true, autoCommit: false },
    });
    await consumer.connect();
    await consumer.subscribe({ topics: [topic] });
    await consumer.run({ eachBatchAutoResolve: false, eachBatch: async () => {} });
    await until(
      'the group holding both partitions',
      30_000,
      async () => consumer!.assignment().length,
      (n) => n === 2,
    );

    sampler = new LagSampler(pool, kafka, admin, prefix, Date.now());
    expect(await sampler.consumerLag()).toBe(events.length);
  }, 60_000);
});
