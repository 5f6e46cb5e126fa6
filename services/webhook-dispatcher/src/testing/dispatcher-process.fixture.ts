// A dispatcher in a process of its own, for the test that kills it with SIGKILL mid-batch.
import { PgLogBus } from '@ofp/bus';
import { EventStore } from '@ofp/event-store';
import { BearerGate, TokenBucketLimiter } from '@ofp/auth-tokens';
import { ModuleRunner, PostgresSession, createLogger, createPool, loadSecretsKeyring } from '@ofp/runtime';
import { testSecretsKeyFile } from '@ofp/testing';
import { createWebhookDispatcher } from '../module.js';

const url = process.env.DATABASE_URL!;
const pool = createPool({ connectionString: url, applicationName: 'dispatcher-fixture' });
const logger = createLogger({ name: 'dispatcher-fixture', level: 'warn' });
const store = new EventStore(pool, { outbox: false });
const session = new PostgresSession({ connectionString: url, applicationName: 'dispatcher-fixture', logger });
const dispatcher = createWebhookDispatcher({
  // The key of the harness that made the webhooks.
  secrets: await loadSecretsKeyring(testSecretsKeyFile()),
  pool,
  session,
  store,
  bus: new PgLogBus(pool, session, store, logger, { batchSize: 100, pollIntervalMs: 50 }),
  logger,
  clock: () => new Date(),
  // This process serves no HTTP: its routes, and so its gate, are never used.
  gate: new BearerGate(
    { verify: () => Promise.reject(new Error('no HTTP here')) },
    new TokenBucketLimiter({ capacity: 1, refillPerSecond: 1 }, () => new Date()),
  ),
  publicUrl: 'http://localhost',
  allowPrivateTargets: true,
  limits: { concurrency: 32, endpointConcurrency: 32, pollIntervalMs: 50 },
});
await new ModuleRunner([dispatcher.delivery, dispatcher.intake], logger).start();
process.stdout.write('dispatcher started\n');
