#!/usr/bin/env node
// Rebuilds the read model from the event store: `npm run rebuild-projections` (DATABASE_URL required).
import { SingleBar, Presets } from 'cli-progress';
import { z } from 'zod';
import { EventStore } from '@ofp/event-store';
import { createLogger, createPool, env, loadConfig } from '@ofp/runtime';
import { rebuildReadModel } from '../rebuild.js';

const config = loadConfig(z.object({ DATABASE_URL: env.url(), LOG_LEVEL: env.logLevel() }), process.env);
const logger = createLogger({ name: 'rebuild-projections', level: config.LOG_LEVEL });
const pool = createPool({ connectionString: config.DATABASE_URL, applicationName: 'rebuild-projections' });
const bar = new SingleBar(
  { format: 'rebuild [{bar}] {percentage}% | {value}/{total} events | {duration}s' },
  Presets.shades_classic,
);
let started = false;
try {
  const result = await rebuildReadModel(pool, new EventStore(pool, { outbox: false }), (done, total) => {
    if (!started) {
      bar.start(total, done);
      started = true;
    }
    bar.setTotal(total);
    bar.update(done);
  });
  bar.stop();
  logger.info({ events: result.events }, 'read model rebuilt and swapped in');
} finally {
  await pool.end();
}
