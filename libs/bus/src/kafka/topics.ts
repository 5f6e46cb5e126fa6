import type { Admin } from './kafka-javascript.js';

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

/** How long ensureTopics waits for every partition of new topics to have a leader. */
const LEADERS_TIMEOUT_MS = 30_000;

/**
 * Creates the topics that do not exist yet (an existing topic is left as it is) and waits until every
 * partition of them has a leader: a consumer or producer that comes right after a creation (another
 * process's, say) would otherwise meet UNKNOWN_TOPIC_OR_PARTITION. With `create: false` a missing
 * topic is an error that names it (the start-up check names them all before this runs).
 */
export async function ensureTopics(
  admin: Admin,
  settings: TopicSettings,
  topics: readonly string[],
): Promise<void> {
  const existing = new Set(await admin.listTopics());
  const missing = topics.filter((t) => !existing.has(t));
  if (missing.length > 0 && !settings.create) {
    throw new Error(`Kafka topics missing (KAFKA_CREATE_TOPICS=false): ${missing.join(', ')}`);
  }
  if (missing.length > 0) {
    // Several processes starting together create the same topics: whichever loses the race is told
    // that they exist (createTopics resolves false), and all then wait for the leaders below.
    await admin.createTopics({
      topics: missing.map((topic) => ({
        topic,
        numPartitions: settings.partitions,
        replicationFactor: settings.replicationFactor,
      })),
    });
  }
  const deadline = Date.now() + LEADERS_TIMEOUT_MS;
  for (;;) {
    const metadata = await admin.fetchTopicMetadata({ topics: [...topics] }).catch(() => undefined);
    const led = metadata?.every((t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0));
    if (led) return;
    if (Date.now() > deadline)
      throw new Error(
        `Kafka topics without partition leaders after ${LEADERS_TIMEOUT_MS} ms: ${topics.join(', ')}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
