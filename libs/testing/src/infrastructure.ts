import type { Logger } from '@ofp/runtime';
import { startTestKafka } from './kafka.js';
import { startTestPostgres } from './postgres.js';

export interface Infrastructure {
  databaseUrl: string;
  /** Bootstrap addresses (`host:port`) of the Kafka cluster. */
  kafkaBrokers: string[];
  stop(): Promise<void>;
}

/**
 * The one entry point through which tests, benchmarks and scripts get real infrastructure:
 * Postgres (DATABASE_URL, else embedded in `.cache/<postgresFolder>`) and Kafka (KAFKA_BROKERS, else
 * Testcontainers, else a local broker, or a cluster of `kafkaNodes`), started side by side.
 */
export async function startInfrastructure(
  logger: Logger,
  kafkaNodes = 1,
  postgresFolder?: string,
): Promise<Infrastructure> {
  const [postgres, kafka] = await Promise.allSettled([
    startTestPostgres(logger, postgresFolder),
    startTestKafka(logger, kafkaNodes),
  ]);
  if (postgres.status === 'fulfilled' && kafka.status === 'fulfilled') {
    return {
      databaseUrl: postgres.value.url,
      kafkaBrokers: kafka.value.brokers,
      async stop() {
        await Promise.all([postgres.value.stop(), kafka.value.stop()]);
      },
    };
  }
  // Whichever did start must not outlive the failed start.
  for (const started of [postgres, kafka]) if (started.status === 'fulfilled') await started.value.stop();
  const failures = [postgres, kafka]
    .filter((result) => result.status === 'rejected')
    .map((result): unknown => result.reason);
  throw failures.length === 1
    ? failures[0]
    : new AggregateError(failures, 'Postgres and Kafka failed to start');
}
