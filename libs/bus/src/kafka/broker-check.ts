import type { DependencyCheck } from '@ofp/runtime';
import type { Admin, Kafka } from './kafka-javascript.js';

/** How long the check waits for the cluster's answer. */
const CHECK_TIMEOUT_MS = 3_000;

/**
 * Whether the Kafka cluster answers: a metadata request (the topics' list) on an admin client of its
 * own, given a few seconds, and connected again after a failure.
 */
export function kafkaBrokerCheck(kafka: Kafka, brokers: readonly string[]): DependencyCheck {
  let admin: Admin | undefined;
  const drop = async (): Promise<void> => {
    const lost = admin;
    admin = undefined;
    await lost?.disconnect().catch(() => {});
  };
  return {
    name: `Kafka ${brokers.join(',')}`,
    kind: 'kafka',
    async check() {
      try {
        if (!admin) {
          admin = kafka.admin();
          await admin.connect();
        }
        await admin.listTopics({ timeout: CHECK_TIMEOUT_MS });
      } catch (error) {
        await drop();
        throw error;
      }
    },
    close: drop,
  };
}
