import { startInfrastructure, type Infrastructure } from './infrastructure.js';
import { testLogger } from './logger.js';
import { TEST_INFRASTRUCTURE, type InfrastructureAddresses } from './jest-worker-setup.js';

declare global {
  /**
   * The Postgres and Kafka pairs of this jest run, the n-th for worker n: on the global object, as the
   * global setup, the runner and the global teardown are modules loaded apart in jest's own process.
   */
  var ofpInfrastructure: Promise<Infrastructure>[] | undefined;
}

/**
 * Makes sure the jest run has a Postgres cluster and a Kafka broker for each of its first `workers`
 * workers, and hands their addresses to the workers started from now on through the environment (each
 * takes its own: jest-worker-setup.ts). Two test files running side by side share neither a cluster
 * (whose oldest open transaction holds back the readers of the event log in all of its databases) nor a
 * broker (whose consumer groups rebalance for a member of any file). The first pair starts alone, so
 * that a fresh clone fetches the broker's jars and prepares Postgres's binaries once; the others side by
 * side. If one fails, every pair is stopped.
 */
export async function provideInfrastructure(workers: number): Promise<void> {
  const pairs = (globalThis.ofpInfrastructure ??= []);
  const logger = testLogger('test-infrastructure');
  try {
    if (pairs.length === 0) pairs.push(startInfrastructure(logger));
    await pairs[0];
    while (pairs.length < workers)
      pairs.push(startInfrastructure(logger, 1, `test-postgres-${pairs.length + 1}`));
    const addresses: InfrastructureAddresses[] = (await Promise.all(pairs)).map(
      ({ databaseUrl, kafkaBrokers }) => ({ databaseUrl, kafkaBrokers }),
    );
    // Not DATABASE_URL and KAFKA_BROKERS themselves: in this process they are the person's (a Postgres
    // and a Kafka of their own for every pair), which the next pair's start reads.
    process.env[TEST_INFRASTRUCTURE] = JSON.stringify(addresses);
  } catch (error) {
    await stopInfrastructure();
    throw error;
  }
}

/** Stops every pair that started (once, however many projects ran). */
export async function stopInfrastructure(): Promise<void> {
  const pairs = globalThis.ofpInfrastructure ?? [];
  globalThis.ofpInfrastructure = undefined;
  const started = await Promise.allSettled(pairs);
  await Promise.all(started.flatMap((pair) => (pair.status === 'fulfilled' ? [pair.value.stop()] : [])));
}
