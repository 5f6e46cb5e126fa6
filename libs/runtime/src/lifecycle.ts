import type { Logger } from './logger.js';
import { StartupError } from './preflight.js';

/**
 * A unit with a lifecycle (compare Grafana Loki/Mimir's modules, Backstage's root lifecycle). `start`
 * resolves once the module does its work; `stop` stops taking new work, drains what is in flight and
 * releases its resources.
 */
export interface Module {
  readonly name: string;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Whether the module can take work now: false before start, and again once stopping. */
  ready(): boolean;
}

/**
 * Runs modules in the order given (a module graph's order, `moduleGraph`): starts them one
 * after another, is ready once all are, and stops the started ones in reverse.
 */
export class ModuleRunner {
  private readonly started: Module[] = [];
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly modules: readonly Module[],
    private readonly logger: Logger,
  ) {}

  /** The modules' names in start order. */
  get order(): readonly string[] {
    return this.modules.map((module) => module.name);
  }

  /**
   * One line at `info` once every module started (each module's own at `debug`), so that a start that
   * fails on a person's mistake prints that one line alone (`runUntilSignal`).
   */
  async start(): Promise<void> {
    const begun = Date.now();
    for (const module of this.modules) {
      if (this.stopping) return;
      const moduleBegun = Date.now();
      await module.start();
      this.started.push(module);
      this.logger.debug({ module: module.name, ms: Date.now() - moduleBegun }, 'module started');
    }
    this.logger.info({ modules: this.order, ms: Date.now() - begun }, 'started');
  }

  ready(): boolean {
    return (
      this.stopping === undefined &&
      this.started.length === this.modules.length &&
      this.modules.every((m) => m.ready())
    );
  }

  /** Idempotent: a second call waits for the first. */
  stop(): Promise<void> {
    this.stopping ??= this.stopAll();
    return this.stopping;
  }

  private async stopAll(): Promise<void> {
    const wasStarted = this.started.length === this.modules.length;
    for (const module of [...this.started].reverse()) {
      try {
        await module.stop();
        this.logger.debug({ module: module.name }, 'module stopped');
      } catch (error) {
        this.logger.error({ module: module.name, err: error }, 'module failed to stop cleanly');
      }
    }
    if (wasStarted) this.logger.info('stopped');
  }
}

/**
 * Runs modules until SIGTERM, SIGINT or SIGHUP, then stops them in reverse order and exits. A second
 * signal during the drain exits at once.
 */
export async function runUntilSignal(runner: ModuleRunner, logger: Logger): Promise<void> {
  let signalled = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (signalled) {
      logger.warn({ signal }, 'second signal during shutdown, exiting now');
      process.exit(1);
    }
    signalled = true;
    logger.info({ signal }, 'shutting down');
    runner.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  // The terminal of an `npm start` closed: unhandled, it ended the process at once, and the embedded
  // Postgres (a process group of its own, which the hangup does not reach) ran on until the next start.
  process.on('SIGHUP', onSignal);
  try {
    await runner.start();
  } catch (error) {
    if (error instanceof StartupError) process.stderr.write(`${error.message}\n`);
    else logger.fatal({ err: error }, 'start failed');
    await runner.stop();
    process.exit(1);
  }
}
