import { ModuleRunner, type Module } from './lifecycle.js';
import { createLogger } from './logger.js';

describe('ModuleRunner', () => {
  const log: string[] = [];
  const module = (name: string, failStop = false, dependsOn: string[] = []): Module => {
    let up = false;
    return {
      name,
      dependsOn,
      start: async () => {
        log.push(`start ${name}`);
        up = true;
      },
      stop: async () => {
        log.push(`stop ${name}`);
        up = false;
        if (failStop) throw new Error(`${name} failed to stop`);
      },
      ready: () => up,
    };
  };

  it('starts in order, is ready only when all are, and stops in reverse even when one fails', async () => {
    const runner = new ModuleRunner(
      [module('database'), module('api', true), module('http')],
      createLogger({ name: 'test', level: 'silent' }),
    );
    expect(runner.ready()).toBe(false);
    await runner.start();
    expect(runner.ready()).toBe(true);
    const stopping = runner.stop();
    expect(runner.ready()).toBe(false);
    await stopping;
    await runner.stop();
    expect(log).toEqual([
      'start database',
      'start api',
      'start http',
      'stop http',
      'stop api',
      'stop database',
    ]);
  });

  it('starts dependencies first, whatever order the modules are given in', () => {
    const runner = new ModuleRunner(
      [
        module('http', false, ['api', 'auth']),
        module('api', false, ['database']),
        module('auth', false, ['database']),
        module('database'),
      ],
      createLogger({ name: 'test', level: 'silent' }),
    );
    expect(runner.order).toEqual(['database', 'api', 'auth', 'http']);
  });

  it('refuses a dependency on a module that is not there, and a cycle', () => {
    const logger = createLogger({ name: 'test', level: 'silent' });
    expect(() => new ModuleRunner([module('api', false, ['database'])], logger)).toThrow(
      'module api depends on database, which is not in the graph',
    );
    expect(() => new ModuleRunner([module('a', false, ['b']), module('b', false, ['a'])], logger)).toThrow(
      'module dependency cycle: a -> b -> a',
    );
  });
});
