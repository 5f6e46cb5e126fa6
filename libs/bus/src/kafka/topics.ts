import type { Admin } from 'kafkajs';

export interface TopicSettings {
  /** Topic name = prefix + stream type, e.g. `ofp.events.people`. */
  readonly prefix: string;
  readonly partitions: number;
  readonly replicationFactor: number;
}

export function topicOf(settings: TopicSettings, streamType: string): string {
  return `${settings.prefix}${streamType}`;
}

/** How long ensureTopics waits for every partition of new topics to have a leader. */
const LEADERS_TIMEOUT_MS = 30_000;

/**
 * Creates the topics that do not exist yet (an existing topic is left as it is) and waits until every
 * partition of them has a leader: a consumer or producer that comes right after a creation (another
 * process's, say) would otherwise meet UNKNOWN_TOPIC_OR_PARTITION.
 */
export async function ensureTopics(
  admin: Admin,
  settings: TopicSettings,
  topics: readonly string[],
): Promise<void> {
  const existing = new Set(await admin.listTopics());
  const missing = topics.filter((t) => !existing.has(t));
  if (missing.length > 0) {
    // Two processes may create the same topic at once; the loser's createTopics answers false.
    await admin.createTopics({
      waitForLeaders: true,
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
    const led = metadata?.topics.every(
      (t) => t.partitions.length > 0 && t.partitions.every((p) => p.leader >= 0),
    );
    if (led) return;
    if (Date.now() > deadline)
      throw new Error(
        `Kafka topics without partition leaders after ${LEADERS_TIMEOUT_MS} ms: ${topics.join(', ')}`,
      );
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
