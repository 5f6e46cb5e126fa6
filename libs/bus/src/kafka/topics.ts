import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from '@ofp/runtime';
import type { Admin, Kafka, RdKafkaMetadata, RdKafkaProducer } from './kafka-javascript.js';

export interface TopicSettings {
  /** Topic name = prefix + stream type, e.g. `ofp.events.people`. */
  readonly prefix: string;
  readonly partitions: number;
  readonly replicationFactor: number;
  /** false: the topics were provisioned (KafkaTopic resources); a missing one is an error, never created. */
  readonly create: boolean;
}

export function topicOf(settings: TopicSettings, streamType: string): string {
  return `${settings.prefix}${streamType}`;
}

/**
 * How long ensureTopics tries to create missing topics, each try through a new client: under KRaft a
 * creation goes to the broker a Metadata answer names as controller (any unfenced broker), and a
 * client keeps that name, so while a broker is frozen but not yet fenced every try of one client can
 * time out on it.
 */
const CREATE_TIMEOUT_MS = 60_000;
/** The time one try of a creation has (the client's default: 5 s). */
const CREATE_TRY_MS = 5_000;
/** How long ensureTopics waits for every partition of new topics to have a leader. */
const LEADERS_TIMEOUT_MS = 30_000;
/** How long it then waits for every broker to know them, before going on with a warning. */
const EVERY_BROKER_TIMEOUT_MS = 30_000;
/** How often it logs which brokers it still waits for. */
const PROGRESS_EVERY_MS = 5_000;
/** The time one broker has to answer one metadata request. */
const BROKER_ANSWER_MS = 2_000;

/**
 * Creates the topics that do not exist yet (an existing topic is left as it is), waits until every
 * partition of them has a leader, then until every broker knows them: a consumer or producer that comes
 * right after a creation (another process's, say) would otherwise meet UNKNOWN_TOPIC_OR_PARTITION.
 * With `create: false` a missing topic is an error that names it (the start-up check names them all
 * before this runs).
 */
export async function ensureTopics(
  kafka: Kafka,
  settings: TopicSettings,
  topics: readonly string[],
  logger: Logger,
): Promise<void> {
  await createMissing(kafka, settings, topics, logger);
  const admin = kafka.admin();
  await admin.connect();
  let brokers: string[];
  try {
    brokers = await untilLed(admin, topics);
  } finally {
    await admin.disconnect();
  }
  await untilEveryBrokerKnows(kafka, brokers, topics, logger);
}

/**
 * Creates the topics that do not exist yet, trying again through a new client (see
 * {@link CREATE_TIMEOUT_MS}) until the cluster takes them; logs once what it waits for, and after the
 * bound fails with an error that names the topics and the last failure.
 */
async function createMissing(
  kafka: Kafka,
  settings: TopicSettings,
  topics: readonly string[],
  logger: Logger,
): Promise<void> {
  const deadline = Date.now() + CREATE_TIMEOUT_MS;
  for (let attempt = 1; ; attempt++) {
    const admin = kafka.admin();
    try {
      await admin.connect();
      const existing = new Set(await admin.listTopics());
      const missing = topics.filter((t) => !existing.has(t));
      if (missing.length === 0) return;
      if (!settings.create)
        throw new TopicsMissing(`Kafka topics missing (KAFKA_CREATE_TOPICS=false): ${missing.join(', ')}`);
      // Several processes starting together create the same topics: whichever loses the race is told
      // that they exist (createTopics resolves false), and all then wait for the leaders.
      await admin.createTopics({
        topics: missing.map((topic) => ({
          topic,
          numPartitions: settings.partitions,
          replicationFactor: settings.replicationFactor,
        })),
        timeout: CREATE_TRY_MS,
      });
      return;
    } catch (error) {
      if (error instanceof TopicsMissing) throw error;
      if (Date.now() >= deadline)
        throw new Error(
          `Kafka topics could not be created within ${CREATE_TIMEOUT_MS} ms (${attempt} tries): ${topics.join(', ')}: ${String(error)}`,
          { cause: error },
        );
      if (attempt === 1)
        logger.warn(
          { err: error, topics, boundMs: CREATE_TIMEOUT_MS },
          'creating the Kafka topics failed (a broker that does not answer and is not yet fenced, say): trying again through a new client until the cluster takes them',
        );
      await sleep(500);
    } finally {
      await admin.disconnect().catch(() => {});
    }
  }
}

/** Topics missing where they may not be created: no try would heal that. */
class TopicsMissing extends Error {}

/** Waits for every partition of the topics to have a leader; resolves with the brokers the cluster names. */
async function untilLed(admin: Admin, topics: readonly string[]): Promise<string[]> {
  const deadline = Date.now() + LEADERS_TIMEOUT_MS;
  for (;;) {
    const metadata = await admin.fetchTopicMetadata({ topics: [...topics] }).catch(() => undefined);
    if (metadata?.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0))) {
      // The consumers' group coordinators are the brokers of the offsets topic's replicas.
      const offsets = await admin
        .fetchTopicMetadata({ topics: ['__consumer_offsets'], timeout: BROKER_ANSWER_MS })
        .catch(() => []);
      // A replica on a broker the cluster does not list (down and fenced) comes without an address
      // (`:0`): nobody can be sent to it, and a client bootstrapped there would wait out the bound.
      const nodes = [...metadata, ...offsets].flatMap((t) =>
        t.partitions.flatMap((p) => (p.replicaNodes ?? []).filter(({ host, port }) => host && port > 0)),
      );
      return [...new Set(nodes.map(({ host, port }) => `${host}:${port}`))];
    }
    if (Date.now() > deadline)
      throw new Error(
        `Kafka topics without partition leaders after ${LEADERS_TIMEOUT_MS} ms: ${topics.join(', ')}`,
      );
    await sleep(200);
  }
}

/**
 * Asks each of `brokers` (the replicas of the topics and of the consumers' offsets topic) for the
 * topics until each answers them with every partition led. A KRaft broker applies a topic's creation
 * from the controller's metadata log a moment after the creation is acknowledged: a consumer that asks
 * a broker within that moment is told `Unknown topic or partition` and leaves the topic out of its
 * group's assignment until its next metadata refresh (`topic.metadata.refresh.interval.ms`, 10 s),
 * which stays the safety net. Each broker is asked through a client of its own bootstrapped at
 * its address alone ({@link metadataOf}). A broker that does not answer (stopped, cut off) is waited for
 * within the bound too, until the cluster fences it: then no consumer can ask it either, and the
 * metadata gives its replicas no address, so {@link untilLed} leaves it out. After the bound,
 * a warning names the brokers, and subscribe goes on.
 */
async function untilEveryBrokerKnows(
  kafka: Kafka,
  brokers: readonly string[],
  topics: readonly string[],
  logger: Logger,
): Promise<void> {
  const startedAt = Date.now();
  let loggedAt = startedAt;
  let waiting = [...brokers];
  for (;;) {
    const knows = await Promise.all(waiting.map((broker) => knowsTopics(kafka, broker, topics)));
    waiting = waiting.filter((_, i) => !knows[i]);
    const waitedMs = Date.now() - startedAt;
    if (waiting.length === 0) {
      if (waitedMs >= PROGRESS_EVERY_MS) logger.info({ topics, waitedMs }, 'every broker knows the topics');
      return;
    }
    if (waitedMs >= EVERY_BROKER_TIMEOUT_MS) {
      logger.warn(
        { topics, brokers: waiting, waitedMs },
        'Kafka brokers do not know the topics yet; going on (consumers find them at their next metadata refresh)',
      );
      return;
    }
    if (Date.now() - loggedAt >= PROGRESS_EVERY_MS) {
      loggedAt = Date.now();
      logger.info(
        { topics, brokers: waiting, waitedMs },
        'waiting for every Kafka broker to know the topics',
      );
    }
    await sleep(200);
  }
}

/** Whether `broker` itself answers the topics' metadata with a leader for every partition. */
async function knowsTopics(kafka: Kafka, broker: string, topics: readonly string[]): Promise<boolean> {
  const metadata = await metadataOf(kafka, broker, topics, BROKER_ANSWER_MS).catch(() => undefined);
  return metadata?.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0)) ?? false;
}

/** librdkafka's, which its typed configuration does not list. */
const SPARSE_CONNECTIONS = { 'enable.sparse.connections': true } as const;

/** A topic as one broker answers it: no partitions when the broker does not know it. */
export interface BrokerTopicMetadata {
  readonly name: string;
  readonly partitions: readonly {
    readonly id: number;
    readonly leader: number;
    readonly replicas: readonly number[];
  }[];
}

/**
 * The producer under the KafkaJS-compatible one (`_getInternalClient`, which the package's types do
 * not list): its `getMetadata` is librdkafka's `rd_kafka_metadata`, whose answer names the broker that
 * sent it (`orig_broker_name`), which the KafkaJS layer's `fetchTopicMetadata` leaves out.
 */
interface InternalProducer {
  _getInternalClient(): RdKafkaProducer;
}

/**
 * The topics' metadata as the broker at `broker` itself answers it, or an error when it does not
 * (another broker answered, or none within `timeoutMs`). It asks through a client bootstrapped at that
 * address alone and with sparse connections (with the platform's dense ones the client connects to
 * every broker of the first answer, and another answered for this one in 5 of 5 rounds of an
 * experiment on three nodes). librdkafka sends a metadata request to any broker it is connected to,
 * and even with sparse connections it was another one in about 1 round of 5 (while replacing its
 * bootstrap connection with one to the broker's node id): so an answer counts only if librdkafka names
 * as its sender the bootstrap connection (this address, the only one in the list) or the broker
 * advertised at this address.
 */
export async function metadataOf(
  kafka: Kafka,
  broker: string,
  topics: readonly string[],
  timeoutMs: number,
): Promise<BrokerTopicMetadata[]> {
  const producer = kafka.producer({ 'bootstrap.servers': broker, ...SPARSE_CONNECTIONS });
  // The connection's own metadata request has librdkafka's bound (30 s), not this one: a client that
  // connects after the bound is closed then.
  const connected = producer.connect();
  try {
    const late = sleep(timeoutMs, undefined, { ref: false }).then(() => true);
    if (await Promise.race([connected.then(() => false), late]))
      throw new Error(`${broker} did not answer within ${timeoutMs} ms`);
    const client = (producer as unknown as InternalProducer)._getInternalClient();
    // All topics: a request that names a topic may create it on a broker that creates topics on demand.
    const metadata = await new Promise<RdKafkaMetadata>((resolve, reject) => {
      client.getMetadata({ allTopics: true, timeout: timeoutMs }, (error, answer) => {
        if (error) reject(new Error(`${broker}: ${error.message}`, { cause: error }));
        else resolve(answer);
      });
    });
    const sender = answeredBy(metadata.orig_broker_name);
    if (sender !== 'bootstrap' && sender !== broker)
      throw new OtherBrokerAnswered(
        `${metadata.orig_broker_name} answered the metadata request meant for ${broker}`,
      );
    return topics.map(
      (name) => metadata.topics.find((topic) => topic.name === name) ?? { name, partitions: [] },
    );
  } finally {
    void connected.then(
      () => producer.disconnect().catch(() => {}),
      () => {},
    );
  }
}

/** The answer to a metadata request came from another broker than the one it was meant for. */
export class OtherBrokerAnswered extends Error {}

/**
 * librdkafka's name of a broker connection (`[proto://]host:port/nodeid`, or `/bootstrap` for an
 * address of the bootstrap list): `bootstrap`, or the broker's advertised `host:port`.
 */
export function answeredBy(brokerName: string): string {
  const name = brokerName.replace(/^[a-z_]+:\/\//, '');
  const slash = name.lastIndexOf('/');
  return name.slice(slash + 1) === 'bootstrap' ? 'bootstrap' : name.slice(0, slash);
}
