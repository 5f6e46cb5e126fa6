import { startInfrastructure, type Infrastructure } from './infrastructure.js';
import { testLogger } from './logger.js';

declare global {
  var ofpInfrastructure: Promise<Infrastructure> | undefined;
}

/**
 * Starts Postgres and Kafka once for every integration and end-to-end project in this jest run and
 * exports their addresses to the test workers through the environment.
 */
export default async function globalSetup(): Promise<void> {
  globalThis.ofpInfrastructure ??= startInfrastructure(testLogger('test-infrastructure'));
  const infrastructure = await globalThis.ofpInfrastructure;
  process.env.DATABASE_URL = infrastructure.databaseUrl;
  process.env.KAFKA_BROKERS = infrastructure.kafkaBrokers.join(',');
}
