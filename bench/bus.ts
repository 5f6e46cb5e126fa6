/**
 * What the Kafka bus costs per event: CPU (user + system of the process, the client's threads included)
 * per 10,000 events produced and consumed, and the process's peak RSS, for the bus (the outbox relay
 * reading the event store's outbox and publishing CloudEvents; KafkaBus handing them to a handler)
 * against the raw baseline of the same work through the client alone (the same messages, produced with
 * the same acks=all idempotent settings, and read by a consumer group that decodes nothing). Each of the
 * four runs in a process of its own, on the harness's broker and Postgres, with BENCH_EVENTS events
 * (50,000); the outbox is filled before the relay's process starts, and Postgres's own CPU is not
 * counted (the raw baseline has none).
 *
 *   npm run bench:bus
 */
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import {
  Kafka,
  KafkaBus,
  OutboxRelay,
  kafkaClientConfig,
  toKafkaMessage,
  topicOf,
  type TopicSettings,
} from '@ofp/bus';
import { EventStore, migrateEventStore, type StoredEvent } from '@ofp/event-store';
import { PostgresSession, createLogger, createPool } from '@ofp/runtime';
import { CACHE_DIR, startKafkaBroker, startTestPostgres, testLogger } from '@ofp/testing';
import { createBenchTopics, printResult, runInProcess } from './kafka-bench.js';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 50_000);
const BATCH = 500;
const SCHEMA = 'urn:ofp:schema:record-change:1';
const STREAMS = 200;
const PHASES = ['produce-raw', 'produce-bus', 'consume-raw', 'consume-bus'] as const;
type Phase = (typeof PHASES)[number];

interface Result {
  readonly phase: Phase;
  readonly events: number;
  readonly seconds: number;
  readonly cpuMsPer10k: number;
  readonly maxRssMb: number;
}

/** A record change of about the size the platform's are: a person with a few fields. */
function eventOf(index: number): StoredEvent {
  const stream = index % STREAMS;
  return {
    eventId: randomUUID(),
    streamId: `people-${stream}`,
    streamType: 'people',
    version: Math.floor(index / STREAMS) + 1,
    type: 'person.updated',
    orgId: 1,
    data: {
      id: stream,
      first_name: 'Grace',
      last_name: `Hopper ${index}`,
      email: `grace.${index}@example.com`,
      tags: ['bench', 'bus'],
      updated_at: new Date().toISOString(),
    },
    metadata: { actor: 'client:bench', requestId: randomUUID() },
    recordedAt: new Date(),
    position: { transactionId: String(1000 + index), position: index + 1 },
  };
}

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};

/** One phase, in this process: the work, timed and measured. */
async function runPhase(phase: Phase): Promise<Result> {
  const brokers = env('KAFKA_BROKERS').split(',');
  const topics: TopicSettings = JSON.parse(env('BENCH_TOPICS')) as TopicSettings;
  const logger = createLogger({ name: `bench-bus-${phase}`, level: 'warn' });
  const kafka = new Kafka(kafkaClientConfig(brokers, `bench-${phase}`, logger));
  const rawTopic = `${topics.prefix}raw`;
  const cpu = process.cpuUsage();
  const started = performance.now();
  let events = 0;
  if (phase === 'produce-raw') {
    // The same messages the relay sends, made beforehand: the client's work alone is measured.
    const messages = Array.from({ length: EVENTS }, (_, i) => toKafkaMessage(eventOf(i), SCHEMA));
    const producer = kafka.producer({
      kafkaJS: { idempotent: true, acks: -1, allowAutoTopicCreation: false },
      'linger.ms': 0,
    });
    await producer.connect();
    const measuredFrom = process.cpuUsage();
    const from = performance.now();
    for (let i = 0; i < messages.length; i += BATCH)
      await producer.sendBatch({
        topicMessages: [{ topic: rawTopic, messages: messages.slice(i, i + BATCH) }],
      });
    events = messages.length;
    await producer.disconnect();
    return result(phase, events, (performance.now() - from) / 1000, process.cpuUsage(measuredFrom));
  }
  if (phase === 'produce-bus') {
    const pool = createPool({ connectionString: env('DATABASE_URL'), applicationName: 'bench-bus' });
    const store = new EventStore(pool, { outbox: true });
    const session = new PostgresSession({
      connectionString: env('DATABASE_URL'),
      applicationName: 'bench-bus-session',
      logger,
    });
    const relay = new OutboxRelay(kafka, store, logger, {
      session,
      topics,
      batchSize: BATCH,
      pollIntervalMs: 100,
      dataSchemaOf: () => SCHEMA,
    });
    await relay.start();
    while ((await store.outboxBacklog()).events > 0) await new Promise((r) => setTimeout(r, 100));
    events = EVENTS;
    const seconds = (performance.now() - started) / 1000;
    const used = process.cpuUsage(cpu);
    await relay.stop();
    await session.stop();
    await pool.end();
    return result(phase, events, seconds, used);
  }
  // Consumers read until they have every event, from the beginning of their topic.
  let done: () => void = () => {};
  const all = new Promise<void>((resolve) => (done = resolve));
  if (phase === 'consume-raw') {
    const consumer = kafka.consumer({
      kafkaJS: { groupId: `bench-raw-${randomUUID()}`, fromBeginning: true, autoCommit: true },
      'js.consumer.max.batch.size': BATCH,
    });
    await consumer.connect();
    await consumer.subscribe({ topics: [rawTopic] });
    await consumer.run({
      eachBatch: async ({ batch }) => {
        events += batch.messages.length;
        if (events >= EVENTS) done();
        return Promise.resolve();
      },
    });
    await all;
    const seconds = (performance.now() - started) / 1000;
    const used = process.cpuUsage(cpu);
    await consumer.disconnect();
    return result(phase, events, seconds, used);
  }
  const bus = new KafkaBus(kafka, logger, { topics, batchSize: BATCH });
  const subscription = await bus.subscribe({
    group: `bench-bus-${randomUUID()}`,
    streamTypes: ['people'],
    handle: async (batch) => {
      events += batch.length;
      if (events >= EVENTS) done();
      return Promise.resolve();
    },
  });
  await all;
  const seconds = (performance.now() - started) / 1000;
  const used = process.cpuUsage(cpu);
  await subscription.stop();
  await bus.close();
  return result(phase, events, seconds, used);
}

function result(phase: Phase, events: number, seconds: number, cpu: NodeJS.CpuUsage): Result {
  return {
    phase,
    events,
    seconds,
    cpuMsPer10k: ((cpu.user + cpu.system) / 1000 / events) * 10_000,
    maxRssMb: process.resourceUsage().maxRSS / 1024,
  };
}

const phase = process.argv[2] as Phase | undefined;
if (phase) {
  printResult(await runPhase(phase));
  process.exit(0);
}

const logger = testLogger('bench-bus');
const postgres = await startTestPostgres(logger);
const kafka = await startKafkaBroker({ cacheDir: CACHE_DIR, logger });
try {
  const topics = await createBenchTopics(kafka.brokers, 'bench-bus', (each) => [
    topicOf(each, 'people'),
    `${each.prefix}raw`,
  ]);
  const pool = createPool({ connectionString: postgres.url, applicationName: 'bench-bus' });
  await migrateEventStore(pool, logger);
  await pool.query('TRUNCATE es.events, es.outbox, es.parked_events');
  const store = new EventStore(pool, { outbox: true });
  process.stderr.write(`bench:bus: filling the outbox with ${EVENTS} events\n`);
  for (let i = 0; i < EVENTS; i += BATCH) {
    const events = Array.from({ length: Math.min(BATCH, EVENTS - i) }, (_, k) => eventOf(i + k));
    await store.appendToStreams(
      // A stream of its own per event: an append names each stream once.
      events.map((event, k) => ({
        streamId: `${event.streamId}-${i + k}`,
        streamType: 'people',
        expectedVersion: 0,
        orgId: 1,
        events: [{ eventId: event.eventId, type: event.type, data: event.data }],
      })),
    );
  }
  await pool.end();
  const environment = {
    KAFKA_BROKERS: kafka.brokers.join(','),
    DATABASE_URL: postgres.url,
    BENCH_TOPICS: JSON.stringify(topics),
  };
  const results: Result[] = [];
  for (const each of PHASES) {
    process.stderr.write(`bench:bus: ${each}\n`);
    results.push(await runInProcess<Result>(fileURLToPath(import.meta.url), each, environment));
  }
  const of = (name: Phase) => results.find((each) => each.phase === name)!;
  const rows = results.map((each) => ({
    phase: each.phase,
    events: each.events,
    'events/s': Math.round(each.events / each.seconds),
    'CPU ms / 10k': Math.round(each.cpuMsPer10k),
    'peak RSS MB': Math.round(each.maxRssMb),
  }));
  console.table(rows);
  console.log(
    `bus / raw CPU per event: produce ${(of('produce-bus').cpuMsPer10k / of('produce-raw').cpuMsPer10k).toFixed(2)}x, consume ${(of('consume-bus').cpuMsPer10k / of('consume-raw').cpuMsPer10k).toFixed(2)}x`,
  );
} finally {
  await kafka.stop();
  await postgres.stop();
}
