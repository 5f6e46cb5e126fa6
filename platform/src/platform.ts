import {
  ConfigError,
  createLogger,
  loadConfig,
  logFormatFor,
  moduleGraph,
  runUntilSignal,
  type ModuleRunner,
} from '@ofp/runtime';
import { platformConfigSchema, type PlatformConfig } from './config.js';
import { MODULES, TARGETS, type PlatformContext } from './modules.js';

/**
 * The composition root of every process: config → the graph of its TARGET → run (compare Grafana
 * Loki's `-target`). TARGET names a service (the distributed shape, one process per service), `all`
 * of them in one process on an embedded Postgres with the Postgres-log bus (standalone), or
 * `migrate`, which applies the migrations and exits. The graph starts in dependency order and stops
 * in reverse on SIGTERM ({@link MODULES}, {@link TARGETS}).
 */
export async function runPlatform(
  environment: NodeJS.ProcessEnv,
  shutdownTelemetry: () => Promise<void>,
): Promise<void> {
  let config: PlatformConfig;
  try {
    config = loadConfig(platformConfigSchema, environment);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
  const logFormat = logFormatFor(config.LOG_FORMAT);
  const logger = createLogger({ name: `ofp-${config.TARGET}`, level: config.LOG_LEVEL, format: logFormat });
  const context: PlatformContext = {
    config,
    logger,
    logFormat,
    clock: () => new Date(),
    shutdownTelemetry,
    ready: () => runner.ready(),
  };
  const runner: ModuleRunner = moduleGraph(MODULES, TARGETS[config.TARGET], context, logger);
  if (config.TARGET === 'migrate') {
    await runner.start();
    await runner.stop();
    logger.info('migrations applied');
    return;
  }
  await runUntilSignal(runner, logger);
}
