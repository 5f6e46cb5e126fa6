// A replica's consumer in a process of its own, for the test that kills it with SIGKILL: subscribes
// the group GROUP to the things as the static member INSTANCE_ID (none when empty), prints
// "subscribed" once it has partitions, then the id of each event it handles, one a line.
import { createLogger } from '@ofp/runtime';
import { KafkaBus } from './kafka-bus.js';
import { kafkaClientConfig } from './client.js';
import { Kafka } from './kafka-javascript.js';

const kafka = new Kafka(kafkaClientConfig(process.env.KAFKA_BROKERS!.split(','), 'consumer-fixture'));
const bus = new KafkaBus(kafka, createLogger({ name: 'consumer-fixture', level: 'warn' }), {
  topics: { prefix: process.env.TOPIC_PREFIX!, partitions: 4, replicationFactor: 1, create: true },
  batchSize: 100,
  sessionTimeoutMs: Number(process.env.SESSION_TIMEOUT_MS),
  ...(process.env.INSTANCE_ID ? { instanceId: process.env.INSTANCE_ID } : {}),
});
await bus.subscribe({
  group: process.env.GROUP!,
  streamTypes: ['things'],
  handle: (events) =>
    new Promise<void>((resolve) => {
      process.stdout.write(events.map((event) => `${event.eventId}\n`).join(''), () => resolve());
    }),
});
process.stdout.write('subscribed\n');
