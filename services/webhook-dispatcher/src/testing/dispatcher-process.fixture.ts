// A dispatcher in a process of its own, for the test that kills it with SIGKILL mid-batch.
import { PgLogBus } from '@ofp/bus';
import { EventStore } from '@ofp/event-store';
import { createLogger, createPool } from '@ofp/runtime';
import { createWebhookDispatcherModule } from '../module.js';

const url = process.env.DATABASE_URL!;
const pool = createPool({ connectionString: url, applicationName: 'dispatcher-fixture' });
const logger = createLogger({ name: 'dispatcher-fixture', level: 'warn' });
const store = new EventStore(pool, { outbox: false });
const dispatcher = createWebhookDispatcherModule({
  pool,
  connectionString: url,
  store,
  bus: new PgLogBus(pool, url, store, logger, { batchSize: 100, pollIntervalMs: 50 }),
  logger,
  clock: () => new Date(),
  // This process serves no HTTP: its routes are never mounted.
  authenticate: [(_req, _res, next) => next()],
  allowPrivateTargets: true,
  limits: { concurrency: 32, endpointConcurrency: 32, pollIntervalMs: 50 },
});
await dispatcher.start();
process.stdout.write('dispatcher started\n');
