import { stopInfrastructure } from './jest-infrastructure.js';

/** Stops what the global setup and the runner started. */
export default async function globalTeardown(): Promise<void> {
  await stopInfrastructure();
}
