import { startInfrastructure, type Infrastructure } from './infrastructure.js';
import { testLogger } from './logger.js';
import { TEST_INFRASTRUCTURE, type InfrastructureAddresses } from './jest-worker-setup.js';

declare global {
  var ofpInfrastructure: Promise<Infrastructure[]> | undefined;
}

/**
 * Starts Postgres and Kafka once for every integration and end-to-end project in this jest run, a pair
 * for each of jest's workers (`maxWorkers`): two test files running side by side share neither a
 * Postgres cluster (whose oldest open transaction holds back every reader of the event log, in any of
 * its databases) nor a broker (whose consumer groups rebalance for a member of any file). Exports their
 * addresses to the workers through the environment; each worker takes its own (jest-worker-setup.ts).
 */
export default async function globalSetup(globalConfig: { maxWorkers: number }): Promise<void> {
  globalThis.ofpInfrastructure ??= startEach(globalConfig.maxWorkers);
  const each = await globalThis.ofpInfrastructure;
  const addresses: InfrastructureAddresses[] = each.map(({ databaseUrl, kafkaBrokers }) => ({
    databaseUrl,
    kafkaBrokers,
  }));
  process.env[TEST_INFRASTRUCTURE] = JSON.stringify(addresses);
  process.env.DATABASE_URL = addresses[0]!.databaseUrl;
  process.env.KAFKA_BROKERS = addresses[0]!.kafkaBrokers.join(',');
}

/**
 * The first pair alone, so that a fresh clone fetches the broker's jars and prepares Postgres's
 * binaries once, then the others side by side; whatever started is stopped if one fails.
 */
async function startEach(count: number): Promise<Infrastructure[]> {
  const logger = testLogger('test-infrastructure');
  const first = await startInfrastructure(logger);
  const others = await Promise.allSettled(
    Array.from({ length: count - 1 }, (_, i) => startInfrastructure(logger, 1, `test-postgres-${i + 2}`)),
  );
  const started = [
    first,
    ...others.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : [])),
  ];
  const failed = others.find((result) => result.status === 'rejected');
  if (failed) {
    await Promise.all(started.map((infrastructure) => infrastructure.stop()));
    throw failed.reason;
  }
  return started;
}
