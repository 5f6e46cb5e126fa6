import { randomUUID } from 'node:crypto';
import type { Admin, Consumer, ConsumerConfig, EachBatchHandler, Kafka } from 'kafkajs';
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
import { ensureTopics, onceTopicsAreKnown, topicOf, type TopicSettings } from './topics.js';

/** How long subscribe waits for the consumer group to be joined before going on anyway. */
const GROUP_JOIN_TIMEOUT_MS = 30_000;
/** How long a consumer being replaced may take to leave before its successor starts anyway. */
const REPLACED_LEAVE_MS = 5_000;

export interface KafkaBusOptions {
  readonly topics: TopicSettings;
  /** Most events handed to a handler at once. */
  readonly batchSize: number;
  /** KAFKA_SESSION_TIMEOUT_MS; kafkajs's default, 30 s, when not given. */
  readonly sessionTimeoutMs?: number;
  /** Told of a broker that left a consumer's request unanswered (the client's `timedOut`). */
  readonly onRequestTimeout?: (broker: string) => void;
}

/**
 * The distributed bus: one kafkajs consumer group per subscription. A partition's offset is
 * committed only after the handler succeeded for every event up to it; a failing batch is retried
 * in place (with backoff and heartbeats), so nothing after the failure is committed either.
 */
export class KafkaBus implements Bus {
  readonly system = 'kafka';
  /** Durable groups of this process: their topics, and when they last handled a batch. */
  private readonly durable = new Map<string, { topics: string[]; progressedAt: number }>();
  private admin: Promise<Admin> | undefined;
  private readonly counts = new ThroughputCounter();
  /** The consumers' session: heartbeats ten times per timeout, as kafkajs's defaults (30 s, 3 s) do. */
  private readonly membership: Pick<
    ConsumerConfig,
    'sessionTimeout' | 'heartbeatInterval' | 'rebalanceTimeout'
  >;

  constructor(
    private readonly kafka: Kafka,
    private readonly logger: Logger,
    private readonly options: KafkaBusOptions,
  ) {
    const sessionTimeout = options.sessionTimeoutMs ?? 30_000;
    this.membership = {
      sessionTimeout,
      heartbeatInterval: Math.round(sessionTimeout / 10),
      // How long a rebalance waits for the members to join again: never less than a session.
      rebalanceTimeout: Math.max(60_000, sessionTimeout),
    };
  }

  async subscribe(options: SubscribeOptions): Promise<Subscription> {
    const topics = options.streamTypes.map((t) => topicOf(this.options.topics, t));
    const admin = this.kafka.admin();
    await admin.connect();
    try {
      await ensureTopics(admin, this.options.topics, topics);
    } finally {
      await admin.disconnect();
    }
    // A transient subscription is a consumer group of its own, read from the beginning every time.
    const groupId = options.transient ? `${options.group}-${randomUUID()}` : options.group;
    const logger = this.logger.child({ group: options.group });
    let stopping = false;
    const progress = { topics, progressedAt: Date.now() };
    if (!options.transient) this.durable.set(options.group, progress);
    const eachBatch: EachBatchHandler = async (payload) => {
      const { batch } = payload;
      for (let start = 0; start < batch.messages.length; start += this.options.batchSize) {
        const messages = batch.messages.slice(start, start + this.options.batchSize);
        const events: StoredEvent[] = messages.map(fromKafkaMessage);
        this.counts.fetched(options.group, events.length);
        for (let failures = 0; ; failures++) {
          if (stopping || !payload.isRunning() || payload.isStale()) return;
          try {
            await options.handle(events);
            break;
          } catch (error) {
            logger.error(
              { err: error, topic: batch.topic, partition: batch.partition, failures: failures + 1 },
              'event handler failed; retrying',
            );
            await new Promise((resolve) => setTimeout(resolve, retryDelay(failures + 1)));
            await payload.heartbeat();
          }
        }
        this.counts.handled(options.group, events.length);
        const last = messages[messages.length - 1]!.offset;
        // With eachBatchAutoResolve off, kafkajs fetches next from the offset resolved here, not from
        // the one committed: left unresolved, every fetch handed the same messages again, dozens of
        // times a second, while the commits (and so the lag) moved on as if all were well.
        payload.resolveOffset(last);
        const next = (BigInt(last) + 1n).toString();
        // The batch's own commit, not consumer.commitOffsets: that one retries a failed commit five
        // times to the same broker, and kafkajs keeps the broker that coordinated the group when it
        // joined. Once the coordination moved (a broker died, or took its partitions back), every
        // commit went to a broker that answers "not the coordinator", and the consumer's own retries
        // around those made a group commit nothing for minutes. Failing at once, the error reaches
        // kafkajs's runner, which joins the group again through its current coordinator.
        await payload.commitOffsetsIfNecessary({
          topics: [{ topic: batch.topic, partitions: [{ partition: batch.partition, offset: next }] }],
        });
        progress.progressedAt = Date.now();
        await payload.heartbeat();
      }
    };
    let consumer: Consumer;
    /** Connects a consumer of the group and runs it; resolves once it joined (true) or after the timeout. */
    const run = async (): Promise<boolean> => {
      const current = this.kafka.consumer({ groupId, allowAutoTopicCreation: false, ...this.membership });
      consumer = current;
      // kafkajs restarts a consumer that crashed on a retriable error by itself, and leaves one that
      // crashed on any other stopped for good: its group would sit empty while the process looks
      // ready (the chaos run found the dispatcher's so after a broker and Postgres went down). That
      // one is started again here, as a new consumer of the same group.
      current.on(current.events.CRASH, ({ payload }) => {
        if (payload.restart || stopping) return;
        logger.error({ err: payload.error }, 'Kafka consumer stopped by an error; starting it again');
        void restart();
      });
      // A request that timed out means a broker that hangs rather than refusing connections (a long
      // pause, a host cut off). kafkajs neither reloads its metadata nor looks for the group's
      // coordinator again after one: its runner retried against a frozen coordinator five times, each
      // waiting out the request timeout, and the group handled nothing for minutes. A new consumer
      // starts from fresh metadata and finds the current coordinator; bootstrapping from the other
      // brokers first (onRequestTimeout), it does not wait on the hung one.
      current.on(current.events.REQUEST_TIMEOUT, ({ payload }) => {
        this.options.onRequestTimeout?.(payload.broker);
        if (stopping || consumer !== current) return;
        logger.warn(
          { broker: payload.broker, request: payload.apiName },
          'a Kafka request timed out; starting the consumer again',
        );
        void restart();
      });
      // Subscribed means assigned partitions: a service is not ready while it could still miss events.
      const joined = new Promise<boolean>((resolve) => {
        const remove = current.on(current.events.GROUP_JOIN, () => {
          remove();
          resolve(true);
        });
        setTimeout(() => resolve(false), GROUP_JOIN_TIMEOUT_MS).unref();
      });
      await current.connect();
      await onceTopicsAreKnown(() => current.subscribe({ topics, fromBeginning: true }));
      await current.run({ autoCommit: false, eachBatchAutoResolve: false, eachBatch });
      return joined;
    };
    let restarting = false;
    const restart = async (): Promise<void> => {
      if (restarting) return;
      restarting = true;
      try {
        for (let failures = 1; !stopping; failures++) {
          await new Promise((resolve) => setTimeout(resolve, retryDelay(failures)));
          try {
            // Stopped at once (no batch is handled after this), but leaving the group can wait on
            // the hung broker: the successor does not.
            const leaving = consumer.disconnect();
            leaving.catch(() => {});
            await Promise.race([
              leaving,
              new Promise((resolve) => setTimeout(resolve, REPLACED_LEAVE_MS).unref()),
            ]);
            if (!stopping) await run();
            return;
          } catch (error) {
            logger.error({ err: error, failures }, 'starting the Kafka consumer again failed; retrying');
          }
        }
      } finally {
        restarting = false;
      }
    };
    if (!(await run()))
      logger.warn({ timeoutMs: GROUP_JOIN_TIMEOUT_MS }, 'consumer group not joined yet; going on');
    return {
      stop: async () => {
        stopping = true;
        if (this.durable.get(options.group) === progress) this.durable.delete(options.group);
        await consumer.disconnect();
      },
    };
  }

  /**
   * Per group: the high-water marks of its topics' partitions minus its committed offsets. Kafka keeps
   * no time per offset that is cheap to ask, so `seconds` is how long the group has been behind since
   * this process last saw it handle a batch.
   */
  async lag(): Promise<ConsumerLag[]> {
    if (this.durable.size === 0) return [];
    this.admin ??= (async () => {
      const admin = this.kafka.admin();
      await admin.connect();
      return admin;
    })();
    const admin = await this.admin;
    return Promise.all(
      [...this.durable].map(async ([group, { topics, progressedAt }]) => {
        const [committed, heads] = await Promise.all([
          admin.fetchOffsets({ groupId: group, topics }),
          Promise.all(
            topics.map(async (topic) => ({ topic, partitions: await admin.fetchTopicOffsets(topic) })),
          ),
        ]);
        let events = 0;
        for (const { topic, partitions } of heads) {
          const offsets = committed.find((each) => each.topic === topic)?.partitions ?? [];
          for (const partition of partitions) {
            const at = Number(offsets.find((each) => each.partition === partition.partition)?.offset ?? -1);
            // No commit yet: the group reads from the beginning (fromBeginning), the low-water mark.
            events += Number(partition.high) - (at >= 0 ? at : Number(partition.low));
          }
        }
        return { group, events, seconds: events > 0 ? (Date.now() - progressedAt) / 1000 : 0 };
      }),
    );
  }

  throughput(): readonly ConsumerThroughput[] {
    return this.counts.read();
  }

  /** Releases the admin connection {@link lag} opened. */
  async close(): Promise<void> {
    const admin = this.admin;
    this.admin = undefined;
    if (admin) await (await admin).disconnect();
  }
}
