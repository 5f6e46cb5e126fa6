import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { StoredEvent } from '@ofp/event-store';
import type { Logger } from '@ofp/runtime';
import {
  ThroughputCounter,
  retryDelay,
  type Bus,
  type ConsumerLag,
  type ConsumerThroughput,
  type SubscribeOptions,
  type Subscription,
} from '../bus.js';
import { fromKafkaMessage } from './cloudevents.js';
import {
  ErrorCodes,
  type Consumer,
  type ConsumerConstructorConfig,
  type EachBatchPayload,
  type Kafka,
  type TopicPartition,
} from './kafka-javascript.js';
import { REQUEST_TIMEOUT_MS } from './client.js';
import { ReplaceableAdmin } from './replaceable-admin.js';
import { ensureTopics, topicOf, type TopicSettings } from './topics.js';

/** How long subscribe waits for the consumer group to be joined before going on anyway. */
const GROUP_JOIN_TIMEOUT_MS = 30_000;

/**
 * What one consumer holds of its topics at most, before the handler has them: librdkafka's prefetch
 * queue (`queued.max.messages.kbytes`, across its partitions), one fetch response, and the KafkaJS
 * layer's cache (about 1.5 s of what the handler gets through, in batches of `batchSize`). librdkafka's
 * defaults (a 64 MiB queue, 50 MiB fetches) held 400 MB after 200k messages; with these, a consumer
 * holds about 12 MiB of messages, whatever the backlog (docs/kafka.md, "Memory").
 */
export const CONSUMER_PREFETCH = {
  'queued.max.messages.kbytes': 4096,
  'queued.min.messages': 1000,
  'fetch.max.bytes': 4 * 1024 * 1024,
  'max.partition.fetch.bytes': 1024 * 1024,
} as const;

/** Where a consumer group is on one partition, and how many events it has not committed there. */
interface PartitionOffsets {
  readonly topic: string;
  readonly partition: number;
  /** The committed offset, or the low-water mark before the group's first commit. */
  readonly committed: number;
  readonly behind: number;
}

/**
 * How often a consumer asks for the metadata of its topics (librdkafka's default: 5 minutes). A
 * subscribed topic missing from the consumer's first metadata is left out of its group's assignment
 * until the next ask finds it: a KRaft broker applies a topic's creation from the controller's log a
 * moment after the creation is acknowledged, so a consumer that started then and asked that broker met
 * `Unknown topic or partition` and read only the topics it found (a projector replica its people topic
 * alone, for the rest of a chaos run). ensureTopics now waits until every broker knows the topics; this
 * is the safety net for a broker it gave up on, and for a topic deleted and created again later.
 */
const TOPIC_METADATA_REFRESH_MS = 10_000;

/** How often librdkafka commits the offsets the bus stored after each handled batch. */
const COMMIT_INTERVAL_MS = 1_000;

export interface KafkaBusOptions {
  readonly topics: TopicSettings;
  /** Most events handed to a handler at once. */
  readonly batchSize: number;
  /** KAFKA_SESSION_TIMEOUT_MS; 30 s when not given. */
  readonly sessionTimeoutMs?: number;
  /**
   * KAFKA_GROUP_INSTANCE_ID: this replica's name in its durable groups (static membership), so that it
   * takes its partitions back, with no rebalance, when it comes back within the session timeout.
   */
  readonly instanceId?: string;
  /**
   * How long a consumer may go without being handed a batch while its partitions have events it has
   * not handled before the bus starts it again (the watchdog); by default twice the session timeout
   * and at least a minute, longer than a rebalance that waits out a dead member.
   */
  readonly stallTimeoutMs?: number;
}

/**
 * The distributed bus: one consumer group per subscription, on librdkafka through
 * @confluentinc/kafka-javascript's KafkaJS-compatible API. A partition's offset is stored only after
 * the handler succeeded for every event up to it, and librdkafka commits what is stored every second
 * and when the consumer leaves its partitions. A failing batch is retried in place, with backoff, for
 * at most half the max-poll interval; then it goes back to the consumer, which hands it again at its
 * next poll, so that a long database outage keeps the consumer in its group (no rebalance) and
 * commits nothing past the failure.
 */
export class KafkaBus implements Bus {
  readonly system = 'kafka';
  /** Durable groups of this process: their topics, their current consumer, when they last handled a batch. */
  private readonly durable = new Map<
    string,
    { topics: string[]; consumer: () => Consumer; progressedAt: number }
  >();
  /** The lag reads' admin client (the metrics' and the watchdogs'). */
  private readonly admin: ReplaceableAdmin;
  private readonly counts = new ThroughputCounter();
  /** The consumers' session, heartbeat and max-poll interval (also the rebalance timeout). */
  private readonly membership: Pick<
    NonNullable<ConsumerConstructorConfig['kafkaJS']>,
    'sessionTimeout' | 'heartbeatInterval' | 'rebalanceTimeout'
  >;
  private readonly stallTimeoutMs: number;

  constructor(
    private readonly kafka: Kafka,
    private readonly logger: Logger,
    private readonly options: KafkaBusOptions,
  ) {
    const sessionTimeout = options.sessionTimeoutMs ?? 30_000;
    this.membership = {
      sessionTimeout,
      heartbeatInterval: Math.round(sessionTimeout / 10),
      // librdkafka's max.poll.interval.ms, which is also the time a rebalance waits for the members to
      // join again: never less than a session.
      rebalanceTimeout: Math.max(60_000, sessionTimeout),
    };
    this.stallTimeoutMs = options.stallTimeoutMs ?? Math.max(60_000, 2 * sessionTimeout);
    this.admin = new ReplaceableAdmin(kafka);
  }

  async subscribe(options: SubscribeOptions): Promise<Subscription> {
    const topics = options.streamTypes.map((t) => topicOf(this.options.topics, t));
    await ensureTopics(this.kafka, this.options.topics, topics, this.logger);
    // A transient subscription is a consumer group of its own, read from the beginning every time.
    const groupId = options.transient ? `${options.group}-${randomUUID()}` : options.group;
    const logger = this.logger.child({ group: options.group });
    const { group } = options;
    let stopping = false;
    let consumer: Consumer;
    const progress = { topics, consumer: () => consumer, progressedAt: Date.now() };
    if (!options.transient) this.durable.set(group, progress);
    /**
     * What the watchdog watches, per partition (`topic:partition`) of the current consumer: when a batch
     * of it was last handed to the handler (or tried again), or when the consumer was given it.
     */
    const handedAt = new Map<string, number>();
    /** When the consumer was started (again), and when its handler last failed. */
    const clock = { startedAt: Date.now(), failedAt: 0 };
    /** The batch being retried per partition, so that one handed again counts as fetched once. */
    const retrying = new Map<number | string, { offset: string; failures: number }>();
    // In place for at most half the max-poll interval: librdkafka's limit is twice it (the KafkaJS
    // layer doubles it), so a consumer that keeps failing still polls well within it.
    const retryBudgetMs = this.membership.rebalanceTimeout! / 2;
    const eachBatch = async (payload: EachBatchPayload): Promise<void> => {
      const { batch } = payload;
      const key = `${batch.topic}:${batch.partition}`;
      const first = batch.messages[0]!.offset;
      const events: StoredEvent[] = batch.messages.map(fromKafkaMessage);
      let failures = retrying.get(key)?.offset === first ? retrying.get(key)!.failures : 0;
      if (failures === 0) this.counts.fetched(group, events.length);
      const giveBackAt = Date.now() + retryBudgetMs;
      for (;;) {
        handedAt.set(key, Date.now());
        // Returning without resolving: the KafkaJS layer seeks back, and nothing is committed past it.
        if (stopping || !payload.isRunning() || payload.isStale()) return;
        try {
          await options.handle(events);
          break;
        } catch (error) {
          failures++;
          clock.failedAt = Date.now();
          retrying.set(key, { offset: first, failures });
          logger.error(
            { err: error, topic: batch.topic, partition: batch.partition, failures },
            'event handler failed; retrying',
          );
          const delay = retryDelay(failures);
          // Thrown out of the batch, it comes again at the consumer's next poll (the layer seeks back).
          if (Date.now() + delay > giveBackAt) throw error;
          await sleep(delay);
        }
      }
      retrying.delete(key);
      this.counts.handled(group, events.length);
      payload.resolveOffset(batch.messages[batch.messages.length - 1]!.offset);
      progress.progressedAt = Date.now();
    };

    /** Connects a consumer of the group and runs it; resolves once it has partitions (true) or after the timeout. */
    const run = async (): Promise<boolean> => {
      let assigned: (joined: boolean) => void = () => {};
      const joined = new Promise<boolean>((resolve) => {
        assigned = resolve;
        setTimeout(() => resolve(false), GROUP_JOIN_TIMEOUT_MS).unref();
      });
      const current = this.kafka.consumer({
        kafkaJS: {
          groupId,
          fromBeginning: true,
          autoCommit: true,
          autoCommitInterval: COMMIT_INTERVAL_MS,
          allowAutoTopicCreation: false,
          ...this.membership,
        },
        'js.consumer.max.batch.size': this.options.batchSize,
        ...CONSUMER_PREFETCH,
        'topic.metadata.refresh.interval.ms': TOPIC_METADATA_REFRESH_MS,
        // Static membership for the durable groups only: a transient group has one member, this one.
        ...(this.options.instanceId && !options.transient
          ? { 'group.instance.id': this.options.instanceId }
          : {}),
        // Subscribed means assigned partitions: a service is not ready while it could still miss events.
        rebalance_cb: (error: { code: number }, assignment: TopicPartition[]) => {
          if (error.code !== ErrorCodes.ERR__ASSIGN_PARTITIONS) return;
          for (const { topic, partition } of assignment) handedAt.set(`${topic}:${partition}`, Date.now());
          this.counts.assigned(group);
          assigned(true);
        },
      });
      consumer = current;
      await current.connect();
      await current.subscribe({ topics });
      await current.run({ eachBatchAutoResolve: false, eachBatch });
      return joined;
    };

    let restarting: Promise<void> | undefined;
    /** A new consumer of the group in place of the current one (the same member, when static). */
    const restart = (reason: string): Promise<void> =>
      (restarting ??= (async () => {
        this.counts.restarted(group);
        logger.warn({ reason }, 'starting the Kafka consumer again');
        for (let failures = 0; !stopping; failures++) {
          try {
            await consumer.disconnect().catch(() => {});
            if (!stopping) await run();
            return;
          } catch (error) {
            logger.error({ err: error, failures: failures + 1 }, 'starting the Kafka consumer again failed');
            await sleep(retryDelay(failures + 1));
          }
        }
      })().finally(() => {
        restarting = undefined;
        clock.startedAt = Date.now();
      }));

    // The watchdog judges every partition of the group's topics on its own, so that a topic that moves
    // does not hide one that does not (the projector is one group over every topic it projects). A
    // partition stalls when it has events its group has not committed and, for stallTimeoutMs since
    // they were seen, neither did its group's commit on it move nor was a batch of it handed here:
    // - on this consumer's partitions, the KafkaJS layer of @confluentinc/kafka-javascript can stop
    //   calling its handler after a quiet period (confluentinc/confluent-kafka-javascript#476), or hand
    //   the batches of some partitions and never fetch the others;
    // - on the others', this consumer may be the one that should read them: fenced by another under its
    //   static member's name, or with its assignment lost and never joined again, or its group assigned
    //   without a topic it subscribes to; a consumer that owns them and is stuck is started again by its
    //   own watchdog meanwhile, and a dead one leaves its group within a session, shorter than this.
    // Either starts this consumer again. A handler being retried holds back the batches behind it, so
    // for stallTimeoutMs after a failure (a database outage) and after a (re)start nothing is judged.
    const watched = new Map<string, { committed: number; movedAt: number; behindSince: number }>();
    const watchdog = setInterval(
      () => {
        if (stopping || restarting) return;
        void (async () => {
          const stalled: PartitionOffsets[] = [];
          for (const each of await this.offsets(consumer, topics)) {
            const now = Date.now();
            const key = `${each.topic}:${each.partition}`;
            const seen = watched.get(key);
            const state = {
              committed: each.committed,
              movedAt: seen?.committed === each.committed ? seen.movedAt : now,
              behindSince: each.behind > 0 ? Math.min(seen?.behindSince ?? now, now) : Infinity,
            };
            watched.set(key, state);
            const quietSince = Math.max(state.movedAt, state.behindSince, handedAt.get(key) ?? 0);
            if (now - quietSince >= this.stallTimeoutMs) stalled.push(each);
          }
          const since = Math.max(clock.startedAt, clock.failedAt);
          if (stalled.length === 0 || stopping || restarting || Date.now() - since < this.stallTimeoutMs)
            return;
          for (const { topic } of stalled) this.counts.stalled(group, topic);
          const partitions = stalled.map(
            ({ topic, partition, behind }) => `${topic}[${partition}] behind by ${behind}`,
          );
          return restart(`${partitions.join(', ')}, with none handed for ${this.stallTimeoutMs} ms`);
        })().catch((error: unknown) =>
          logger.warn({ err: error }, 'the consumer watchdog could not read the lag'),
        );
      },
      Math.min(10_000, this.stallTimeoutMs / 4),
    );
    watchdog.unref();

    if (!(await run()))
      logger.warn({ timeoutMs: GROUP_JOIN_TIMEOUT_MS }, 'consumer group not joined yet; going on');
    // The stall timeout counts from the join (as after a restart), not from before it.
    clock.startedAt = Date.now();
    return {
      stop: async () => {
        stopping = true;
        clearInterval(watchdog);
        if (this.durable.get(group) === progress) this.durable.delete(group);
        await restarting;
        await consumer.disconnect();
      },
    };
  }

  /**
   * Per partition of `topics`: where `consumer`'s group is (its committed offset; with no commit yet,
   * the group reads from the beginning, the low-water mark) and how many events it has not committed
   * below the high-water mark.
   * The committed offsets are the consumer's to ask (OffsetFetch through its group's coordinator): the
   * admin client's ListConsumerGroupOffsets crashes the process in librdkafka 2.15 when its answer is
   * NOT_COORDINATOR (a coordinator that moved or is just elected): rd_kafka_handle_OffsetFetch then
   * asks the client's consumer group, which an admin client does not have, to look for the coordinator.
   */
  private async offsets(consumer: Consumer, topics: string[]): Promise<PartitionOffsets[]> {
    const heads = await Promise.all(
      topics.map((topic) =>
        this.admin.use(async (admin) => ({ topic, partitions: await admin.fetchTopicOffsets(topic) })),
      ),
    );
    const partitions = heads.flatMap(({ topic, partitions }) =>
      partitions.map((each) => ({ topic, ...each })),
    );
    const committed = await consumer.committed(
      partitions.map(({ topic, partition }) => ({ topic, partition })),
      REQUEST_TIMEOUT_MS,
    );
    return partitions.map(({ topic, partition, high, low }) => {
      const at = Number(
        committed.find((each) => each.topic === topic && each.partition === partition)?.offset ?? -1,
      );
      const position = at >= 0 ? at : Number(low);
      return { topic, partition, committed: position, behind: Number(high) - position };
    });
  }

  /**
   * Per group: the high-water marks of its topics' partitions minus its committed offsets. Kafka keeps
   * no time per offset that is cheap to ask, so `seconds` is how long the group has been behind since
   * this process last saw it handle a batch.
   */
  async lag(): Promise<ConsumerLag[]> {
    return Promise.all(
      [...this.durable].map(async ([group, { topics, consumer, progressedAt }]) => {
        const events = (await this.offsets(consumer(), topics)).reduce((sum, { behind }) => sum + behind, 0);
        return { group, events, seconds: events > 0 ? (Date.now() - progressedAt) / 1000 : 0 };
      }),
    );
  }

  throughput(): readonly ConsumerThroughput[] {
    return this.counts.read();
  }

  /** Releases the admin connection {@link lag} opened. */
  async close(): Promise<void> {
    await this.admin.close();
  }
}
