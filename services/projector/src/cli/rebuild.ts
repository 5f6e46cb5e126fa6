#!/usr/bin/env node
// Rebuilds the read model from the event store: `npm run rebuild-projections`. The database is
// DATABASE_URL, else the one of the standalone instance running on DATA_DIR (default ./.data).
import { SingleBar, Presets } from 'cli-progress';
import { z } from 'zod';
import { EventStore, ParkedEvents } from '@ofp/event-store';
import {
  ConfigError,
  StartupError,
  checkDatabaseReachable,
  createLogger,
  createPool,
  env,
  exitOnStartupError,
  loadConfig,
  logFormatFor,
} from '@ofp/runtime';
import { instanceSettings } from '@ofp/standalone';
import { rebuildReadModel } from '../rebuild.js';

let config;
try {
  config = loadConfig(z.object({ LOG_LEVEL: env.logLevel(), LOG_FORMAT: env.logFormat() }), process.env);
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  exitOnStartupError(new StartupError(error.message));
}
const settings = await instanceSettings(process.env);
if (settings.databaseUrl === undefined) {
  exitOnStartupError(
    new StartupError(
      `rebuild-projections: no database: no instance runs on DATA_DIR ${settings.dataDir} (start it with npm start), and DATABASE_URL is not set`,
    ),
  );
}
const databaseUrl = settings.databaseUrl.value;
await checkDatabaseReachable(settings.databaseUrl.from, databaseUrl).catch(exitOnStartupError);
const logger = createLogger({
  name: 'rebuild-projections',
  level: config.LOG_LEVEL,
  format: logFormatFor(config.LOG_FORMAT),
});
logger.info(`rebuilding the read model of the database of ${settings.databaseUrl.from}`);
const pool = createPool({ connectionString: databaseUrl, applicationName: 'rebuild-projections' });
// A line every 5 s where output is not a terminal (a Kubernetes Job's log), so it never looks hung.
const bar = new SingleBar(
  {
    format: 'rebuild [{bar}] {percentage}% | {value}/{total} events | {duration}s',
    noTTYOutput: true,
    notTTYSchedule: 5_000,
  },
  Presets.shades_classic,
);
let started = false;
try {
  const store = new EventStore(pool, { outbox: false });
  const result = await rebuildReadModel(pool, store, new ParkedEvents(pool), (done, total) => {
    if (!started) {
      bar.start(total, done);
      started = true;
    }
    bar.setTotal(total);
    bar.update(done);
  });
  bar.stop();
  logger.info({ events: result.events, parked: result.parked }, 'read model rebuilt and swapped in');
  // Parked events are the operator's to look at (API.md §12): named, not a failure of the rebuild.
  if (result.parked > 0)
    logger.warn(
      { parked: result.parked },
      `${result.parked} event(s) could not be applied and were parked with their reason; their records wait behind them: orderctl list-parked-events, then orderctl retry-parked-event once fixed`,
    );
} finally {
  await pool.end();
}
