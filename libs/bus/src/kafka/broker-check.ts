import type { Admin, Kafka } from 'kafkajs';
import type { DependencyCheck } from '@ofp/runtime';

/**
 * Whether the Kafka cluster answers: a metadata request (`describeCluster`) on an admin client of
 * its own, made without retries so that a broker that is down fails the check at once, and
 * connected again after a failure.
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
          admin = kafka.admin({ retry: { retries: 0 } });
          await admin.connect();
        }
        await admin.describeCluster();
      } catch (error) {
        await drop();
        throw error;
      }
    },
    close: drop,
  };
}
