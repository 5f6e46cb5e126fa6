// A relay in a process of its own, for the test that kills it with SIGKILL mid-batch.
import { EventStore } from '@ofp/event-store';
import { PostgresSession, createLogger, createPool } from '@ofp/runtime';
import { kafkaClientConfig } from './client.js';
import { Kafka } from './kafka-javascript.js';
import { OutboxRelay } from './outbox-relay.js';

const url = process.env.DATABASE_URL!;
const pool = createPool({ connectionString: url, applicationName: 'relay-fixture' });
const kafka = new Kafka(kafkaClientConfig(process.env.KAFKA_BROKERS!.split(','), 'relay-fixture'));
const logger = createLogger({ name: 'relay-fixture', level: 'warn' });
const relay = new OutboxRelay(kafka, new EventStore(pool, { outbox: true }), logger, {
  session: new PostgresSession({ connectionString: url, applicationName: 'relay-fixture', logger }),
  topics: { prefix: process.env.TOPIC_PREFIX!, partitions: 4, replicationFactor: 1, create: true },
  batchSize: Number(process.env.BATCH_SIZE),
  pollIntervalMs: 100,
  dataSchemaOf: () => 'urn:ofp:schema:relayed:1',
});
await relay.start();
process.stdout.write('relay started\n');
