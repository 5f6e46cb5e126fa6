import type { Logger } from '@ofp/runtime';
import { startTestPostgres } from './postgres.js';

export interface Infrastructure {
  databaseUrl: string;
  stop(): Promise<void>;
}

/**
 * The one entry point through which tests, benchmarks and scripts get real infrastructure:
 * Postgres (DATABASE_URL, else embedded).
 */
export async function startInfrastructure(logger: Logger): Promise<Infrastructure> {
  const postgres = await startTestPostgres(logger);
  return {
    databaseUrl: postgres.url,
    async stop() {
      await postgres.stop();
    },
  };
}
