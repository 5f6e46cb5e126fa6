import type { DependencyCheck } from '@ofp/runtime';
import type { Kafka } from './kafka-javascript.js';
import { ReplaceableAdmin } from './replaceable-admin.js';

/** How long the check waits for the cluster's answer. */
const CHECK_TIMEOUT_MS = 3_000;

/**
 * Whether the Kafka cluster answers: a metadata request (the topics' list) on an admin client of its
 * own, given a few seconds, and connected again after a failure (a {@link ReplaceableAdmin}: checks
 * that overlap share it, and a failed one's client is let go once the other checks' requests settle).
 */
export function kafkaBrokerCheck(kafka: Kafka, brokers: readonly string[]): DependencyCheck {
  const admin = new ReplaceableAdmin(kafka);
  return {
    name: `Kafka ${brokers.join(',')}`,
    kind: 'kafka',
    async check() {
      await admin.use((client) => client.listTopics({ timeout: CHECK_TIMEOUT_MS }));
    },
    close: () => admin.close(),
  };
}
