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

/** Creates the topics that do not exist yet (an existing topic is left as it is). */
export async function ensureTopics(
  admin: Admin,
  settings: TopicSettings,
  topics: readonly string[],
): Promise<void> {
  const existing = new Set(await admin.listTopics());
  const missing = topics.filter((t) => !existing.has(t));
  if (missing.length === 0) return;
  await admin.createTopics({
    waitForLeaders: true,
    topics: missing.map((topic) => ({
      topic,
      numPartitions: settings.partitions,
      replicationFactor: settings.replicationFactor,
    })),
  });
}
