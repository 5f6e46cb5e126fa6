import { EVENTS_CHANNEL, type EventStore, type StoredEvent } from '@ofp/event-store';
import {
  inTracesOf,
  validTraceparent,
  type Logger,
  type Module,
  type PostgresSession,
  type SessionLock,
} from '@ofp/runtime';
import { retryDelay } from '../bus.js';
import { Wakeup } from '../wakeup.js';
import { toKafkaMessage } from './cloudevents.js';
import type {
  Kafka,
  Producer,
  ProducerConstructorConfig,
  RecordMetadata,
  TopicMessages,
} from './kafka-javascript.js';
import { ensureTopics, topicOf, type TopicSettings } from './topics.js';

export interface OutboxRelayOptions {
  /** The process's session: the leader's lock, and the appends' notifications. */
  readonly session: PostgresSession;
  readonly topics: TopicSettings;
  readonly batchSize: number;
  /** Look again this often without a notification (an event held back behind an older transaction). */
  readonly pollIntervalMs: number;
  /** The `ce_dataschema` of a stream type's events (the AsyncAPI document names each). */
  readonly dataSchemaOf: (streamType: string) => string;
}

/**
 * How long librdkafka keeps trying to deliver a batch (through leader changes and broker restarts)
 * before the relay is told it failed.
 */
const SEND_TIMEOUT_MS = 120_000;

/**
 * The relay's producer: idempotent (which librdkafka keeps with up to five requests in flight per
 * partition, in order), and acks=all. A send that librdkafka could not deliver within SEND_TIMEOUT_MS
 * fails the batch, which stays in the outbox and goes again whole. Exported for the tests that fault
 * the network under it.
 */
export const RELAY_PRODUCER: ProducerConstructorConfig = {
  kafkaJS: { idempotent: true, acks: -1, allowAutoTopicCreation: false },
  // Each batch is awaited whole (the outbox rows go once it is acknowledged): nothing to wait for.
  'linger.ms': 0,
  'message.timeout.ms': SEND_TIMEOUT_MS,
};

/**
 * The partitions of a send that librdkafka acknowledged without an offset (-1001), named
 * `topic[partition]`: a send whose messages are not all known to be on their partitions.
 *
 * An idempotent producer acknowledges a message with no offset when the broker called its batch a
 * duplicate, or "implicitly, by subsequent batch success": librdkafka sends up to five requests per
 * partition at once, and when an earlier one fails and a later one succeeds, it takes the earlier
 * messages for stored. They may not be. A broker that holds no state for the producer on a partition
 * (a partition just created, or a producer just started) accepts any sequence number, so a request
 * that failed with "not leader for partition" while the partition came up leaves a gap behind the one
 * that succeeded (confluentinc/confluent-kafka-go#921, open): a message lost while its send resolved.
 * Seen at 1 send in 2 to a topic produced to 20 ms after its creation (topic-metadata.int.test.ts),
 * which is what the relay does with the topics it creates (ensureTopics). The send's result has the
 * lowest offset per partition, so one message without an offset shows.
 */
export function unconfirmedPartitions(results: readonly RecordMetadata[]): string[] {
  return results
    .filter(({ baseOffset }) => !(Number(baseOffset) >= 0))
    .map(({ topicName, partition }) => `${topicName}[${partition}]`);
}

/** Why a batch failed: a partition acknowledged without an offset, a fatal producer error, any other. */
export type RelayFailure = 'unconfirmed' | 'fatal' | 'other';

/** A send with partitions acknowledged without an offset (unconfirmedPartitions). */
class UnconfirmedSend extends Error {
  constructor(partitions: readonly string[]) {
    super(`Kafka acknowledged ${partitions.join(', ')} without an offset; the batch goes again`);
  }
}

function failureCause(error: unknown): RelayFailure {
  if (error instanceof UnconfirmedSend) return 'unconfirmed';
  return (error as { fatal?: unknown }).fatal === true ? 'fatal' : 'other';
}

/** Advisory lock key that makes one relay active at a time across all processes. */
const LEADER_LOCK = 'ofp:outbox-relay';

/**
 * Publishes outbox rows to Kafka in global order, keyed by stream id, and deletes them once the
 * brokers acknowledged them (acks=all, an idempotent producer: librdkafka retries each send to
 * whichever broker leads the partition by then, in order and without duplicates). At least once: a
 * relay killed between publish and delete publishes those events again after restart, and consumers
 * deduplicate on `ce_id`. Only the holder of a Postgres advisory lock relays; other instances wait as
 * standbys. The lock lives on the process's session: when that connection is lost, the relay stops
 * before its next batch and waits to hold the lock again (another instance may lead meanwhile). A
 * module of the process that runs it.
 */
export class OutboxRelay implements Module {
  readonly name = 'outbox-relay';
  private readonly wakeup = new Wakeup();
  private running = false;
  private loop: Promise<void> | undefined;
  private producer: Producer | undefined;
  private readonly leadership: SessionLock;
  private unlisten: (() => Promise<void>) | undefined;
  private readonly ensuredTopics = new Set<string>();
  /** Failed batches since start, by cause (`outbox_relay_failures_total`); each goes again whole. */
  readonly failures: Record<RelayFailure, number> = { unconfirmed: 0, fatal: 0, other: 0 };

  constructor(
    private readonly kafka: Kafka,
    private readonly store: EventStore,
    private readonly logger: Logger,
    private readonly options: OutboxRelayOptions,
  ) {
    this.leadership = options.session.lock(LEADER_LOCK);
  }

  /** Whether this instance holds the relay lock. */
  isLeader(): boolean {
    return this.leadership.held();
  }

  async start(): Promise<void> {
    this.producer = await this.connectedProducer();
    const wake = (): void => this.wakeup.notify();
    this.unlisten = await this.options.session.listen(EVENTS_CHANNEL, { notify: wake, resumed: wake });
    this.running = true;
    this.loop = this.run();
  }

  private async connectedProducer(): Promise<Producer> {
    const producer = this.kafka.producer(RELAY_PRODUCER);
    await producer.connect();
    return producer;
  }

  /** Connected and relaying, or standing by for the lock. */
  ready(): boolean {
    return this.running;
  }

  async stop(): Promise<void> {
    this.running = false;
    this.wakeup.notify();
    await this.loop;
    await this.producer?.disconnect();
    await this.leadership.release();
    await this.unlisten?.();
  }

  private async run(): Promise<void> {
    let failures = 0;
    let leading = false;
    while (this.running) {
      try {
        if (!this.leadership.held()) {
          if (leading) this.logger.warn('outbox relay lost its lock; standing by until it is ours again');
          leading = await this.leadership.acquire();
          if (!leading) {
            await this.wakeup.wait(this.options.pollIntervalMs);
            continue;
          }
          this.logger.info('outbox relay is the leader');
        }
        this.producer ??= await this.connectedProducer();
        const published = await this.publishBatch();
        failures = 0;
        if (published === 0) await this.wakeup.wait(this.options.pollIntervalMs);
      } catch (error) {
        failures++;
        const cause = failureCause(error);
        this.failures[cause]++;
        this.logger.error({ err: error, failures }, 'outbox relay failed; retrying');
        // A fatal error (librdkafka's word: the idempotent producer was fenced or lost its sequence)
        // leaves the producer unusable; any other failure leaves it as it is, to send the batch again.
        if (cause === 'fatal') {
          const failed = this.producer;
          this.producer = undefined;
          await failed?.disconnect().catch(() => {});
        }
        // Another instance may be better placed: the lock is up for grabs while this one waits.
        await this.leadership.release();
        leading = false;
        await this.wakeup.wait(retryDelay(failures));
      }
    }
  }

  /** Publishes one batch; resolves with how many events it published. */
  private async publishBatch(): Promise<number> {
    const events = await this.store.readOutbox(this.options.batchSize);
    if (events.length === 0) return 0;
    await this.ensureTopicsFor(events);
    // A publish span in the traces of the events it carries (the polling that found none makes none).
    const topicMessages = groupByTopic(events, this.options);
    const results = await inTracesOf(
      events.map((event) => validTraceparent(event.metadata.traceparent)),
      'publish outbox',
      'producer',
      () => this.producer!.sendBatch({ topicMessages }),
      {
        'messaging.system': 'kafka',
        'messaging.operation.type': 'send',
        'messaging.batch.message_count': events.length,
        'messaging.destination.name': topicMessages.map((each) => each.topic).join(','),
      },
    );
    // Not known to be stored: the batch stays in the outbox and goes again whole (consumers deduplicate
    // on `ce_id` what had been stored).
    const unconfirmed = unconfirmedPartitions(results);
    if (unconfirmed.length > 0)
      throw new Error(`Kafka acknowledged ${unconfirmed.join(', ')} without an offset; the batch goes again`);
    await this.store.acknowledgeOutbox(events.map((e) => e.position.position));
    return events.length;
  }

  private async ensureTopicsFor(events: readonly StoredEvent[]): Promise<void> {
    const missing = [...new Set(events.map((e) => topicOf(this.options.topics, e.streamType)))].filter(
      (t) => !this.ensuredTopics.has(t),
    );
    if (missing.length === 0) return;
    await ensureTopics(this.kafka, this.options.topics, missing, this.logger);
    for (const topic of missing) this.ensuredTopics.add(topic);
  }
}

/** Kafka messages per topic, each topic's list in global order (one stream's events stay in order). */
function groupByTopic(events: readonly StoredEvent[], options: OutboxRelayOptions): TopicMessages[] {
  const byTopic = new Map<string, TopicMessages>();
  for (const event of events) {
    const topic = topicOf(options.topics, event.streamType);
    let entry = byTopic.get(topic);
    if (!entry) {
      entry = { topic, messages: [] };
      byTopic.set(topic, entry);
    }
    entry.messages.push(toKafkaMessage(event, options.dataSchemaOf(event.streamType)));
  }
  return [...byTopic.values()];
}
