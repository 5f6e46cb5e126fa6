/**
 * Run by jest in each test file's environment before the file (jest.config.js `setupFiles`): points
 * DATABASE_URL and KAFKA_BROKERS at this worker's own Postgres and Kafka, of those the global setup and
 * the runner started (jest-infrastructure.ts). Workers are numbered from 1 (JEST_WORKER_ID).
 */

/** The environment variable through which jest-infrastructure.ts hands the workers their infrastructure. */
export const TEST_INFRASTRUCTURE = 'OFP_TEST_INFRASTRUCTURE';

export interface InfrastructureAddresses {
  readonly databaseUrl: string;
  readonly kafkaBrokers: readonly string[];
}

const handed = process.env[TEST_INFRASTRUCTURE];
const worker = Number(process.env.JEST_WORKER_ID);
if (handed !== undefined && Number.isInteger(worker) && worker >= 1) {
  const each = JSON.parse(handed) as InfrastructureAddresses[];
  const own = each[(worker - 1) % each.length]!;
  process.env.DATABASE_URL = own.databaseUrl;
  process.env.KAFKA_BROKERS = own.kafkaBrokers.join(',');
}
