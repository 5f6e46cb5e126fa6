import { createLogger } from './logger.js';
import { describeModuleGraph, moduleGraph, moduleOrder, type ModuleDefinitions } from './module-graph.js';

interface Provided {
  database: string;
  pool: string;
  cache: string;
  api: string;
  worker: undefined;
  http: undefined;
}

const logger = createLogger({ name: 'test', level: 'silent' });

/** A graph whose modules record what was built, started and stopped, and what each was given. */
function recordingGraph() {
  const log: string[] = [];
  const given: Record<string, unknown> = {};
  const part =
    <T>(name: keyof Provided, value: T) =>
    (inputs: object) => {
      log.push(`init ${name}`);
      given[name] = Object.keys(inputs)
        .filter((key) => key !== 'prefix')
        .sort();
      return {
        value,
        start: () => Promise.resolve(void log.push(`start ${name}`)),
        stop: () => Promise.resolve(void log.push(`stop ${name}`)),
      };
    };
  const modules: ModuleDefinitions<Provided, { prefix: string }> = {
    database: { deps: [], init: part('database', 'postgres://') },
    pool: { deps: ['database'], init: part('pool', 'pool') },
    cache: { deps: [], init: part('cache', 'cache') },
    api: { deps: ['pool'], optional: ['cache'], init: part('api', 'api') },
    worker: { deps: ['pool'], init: part('worker', undefined) },
    http: { deps: [], optional: ['api', 'worker'], init: part('http', undefined) },
  };
  return { modules, log, given };
}

describe('a module graph', () => {
  it('builds only what its roots need, dependencies first, hands each exactly its dependencies, and stops in reverse', async () => {
    const { modules, log, given } = recordingGraph();
    const runner = moduleGraph(modules, ['api', 'http'], { prefix: 'p' }, logger);
    expect(runner.order).toEqual(['database', 'pool', 'api', 'http']);
    await runner.start();
    expect(runner.ready()).toBe(true);
    await runner.stop();
    expect(log).toEqual([
      'init database',
      'start database',
      'init pool',
      'start pool',
      'init api',
      'start api',
      'init http',
      'start http',
      'stop http',
      'stop api',
      'stop pool',
      'stop database',
    ]);
    // No cache and no worker: optional dependencies are used where present, never pulled in.
    expect(given).toEqual({ database: [], pool: ['database'], api: ['pool'], http: ['api'] });
  });

  it('builds an optional dependency first when the graph has it', () => {
    const { modules } = recordingGraph();
    expect(moduleOrder(modules, ['http', 'cache', 'api'])).toEqual([
      'cache',
      'database',
      'pool',
      'api',
      'http',
    ]);
  });

  it('prints each module with what it needs, optional ones marked', () => {
    const { modules } = recordingGraph();
    expect(describeModuleGraph(modules, ['http', 'api'])).toBe(
      ['database', 'pool ← database', 'api ← pool', 'http ← api?'].join('\n'),
    );
  });

  it('stops what it built when a module fails to start, and only that', async () => {
    const { modules, log } = recordingGraph();
    const failing: ModuleDefinitions<Provided, { prefix: string }> = {
      ...modules,
      api: {
        deps: ['pool'],
        init: () => ({
          value: 'api',
          start: () => Promise.reject(new Error('api failed')),
          stop: () => Promise.resolve(void log.push('stop api')),
        }),
      },
    };
    const runner = moduleGraph(failing, ['api', 'http'], { prefix: 'p' }, logger);
    await expect(runner.start()).rejects.toThrow('api failed');
    await runner.stop();
    expect(log).toEqual([
      'init database',
      'start database',
      'init pool',
      'start pool',
      'stop api',
      'stop pool',
      'stop database',
    ]);
  });

  it('refuses a dependency that is not declared, and a cycle, before building anything', () => {
    const { modules } = recordingGraph();
    const unknown = {
      ...modules,
      pool: { deps: ['redis'], init: modules.pool.init },
    } as unknown as typeof modules;
    expect(() => moduleOrder(unknown, ['api'])).toThrow(
      'module pool depends on redis, which is not declared',
    );
    const cycle = { ...modules, database: { deps: ['api'], init: modules.database.init } } as typeof modules;
    expect(() => moduleOrder(cycle, ['api'])).toThrow(
      'module dependency cycle: api -> pool -> database -> api',
    );
  });
});
