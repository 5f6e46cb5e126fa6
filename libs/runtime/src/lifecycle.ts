import type { Logger } from './logger.js';
import { StartupError } from './preflight.js';

/**
 * A unit with a lifecycle (compare Grafana Loki/Mimir's modules, Backstage's root lifecycle). `start`
 * resolves once the module does its work; `stop` stops taking new work, drains what is in flight and
 * releases its resources.
 */
export interface Module {
  readonly name: string;
  /** Modules that must be started before this one and stopped after it. */
  readonly dependsOn?: readonly string[];
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Whether the module can take work now: false before start, and again once stopping. */
  ready(): boolean;
}

/**
 * Runs a module graph (compare Loki's module manager): starts the modules in the order their
 * declared dependencies give (dependencies first; otherwise in the order given), and stops them in
 * reverse. A dependency on a module that is not in the graph, or a cycle, is a programming error
 * found before anything starts.
 */
export class ModuleRunner {
  private readonly modules: readonly Module[];
  private readonly started: Module[] = [];
  private stopping: Promise<void> | undefined;

  /** `provided`: dependencies met outside the graph (a test harness's migrated database). */
  constructor(
    modules: readonly Module[],
    private readonly logger: Logger,
    provided: readonly string[] = [],
  ) {
    this.modules = startOrder(modules, new Set(provided));
  }

  /** The modules' names in start order. */
  get order(): readonly string[] {
    return this.modules.map((module) => module.name);
  }

  async start(): Promise<void> {
    for (const module of this.modules) {
      if (this.stopping) return;
      const begun = Date.now();
      await module.start();
      this.started.push(module);
      this.logger.info({ module: module.name, ms: Date.now() - begun }, 'module started');
    }
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
    for (const module of [...this.started].reverse()) {
      try {
        await module.stop();
        this.logger.info({ module: module.name }, 'module stopped');
      } catch (error) {
        this.logger.error({ module: module.name, err: error }, 'module failed to stop cleanly');
      }
    }
  }
}

/** Dependencies first (a depth-first topological order that keeps the given order where it can). */
function startOrder(modules: readonly Module[], provided: ReadonlySet<string>): Module[] {
  const byName = new Map<string, Module>();
  for (const module of modules) {
    if (byName.has(module.name)) throw new Error(`two modules are named ${module.name}`);
    byName.set(module.name, module);
  }
  const ordered: Module[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (module: Module, path: readonly string[]): void => {
    const seen = state.get(module.name);
    if (seen === 'done') return;
    if (seen === 'visiting')
      throw new Error(`module dependency cycle: ${[...path, module.name].join(' -> ')}`);
    state.set(module.name, 'visiting');
    for (const name of module.dependsOn ?? []) {
      if (provided.has(name)) continue;
      const dependency = byName.get(name);
      if (!dependency) throw new Error(`module ${module.name} depends on ${name}, which is not in the graph`);
      visit(dependency, [...path, module.name]);
    }
    state.set(module.name, 'done');
    ordered.push(module);
  };
  for (const module of modules) visit(module, []);
  return ordered;
}

/**
 * Runs modules until SIGTERM or SIGINT, then stops them in reverse order and exits. A second signal
 * during the drain exits at once.
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
  try {
    await runner.start();
  } catch (error) {
    if (error instanceof StartupError) process.stderr.write(`${error.message}\n`);
    else logger.fatal({ err: error }, 'start failed');
    await runner.stop();
    process.exit(1);
  }
}
