import { provideInfrastructure } from './jest-infrastructure.js';

/**
 * Starts Postgres and Kafka once for every integration and end-to-end project in this jest run, for its
 * first worker; the runner adds a pair for each further worker a round of files will use
 * (jest-runner.ts), so that a run of one file starts one pair.
 */
export default async function globalSetup(): Promise<void> {
  await provideInfrastructure(1);
}
