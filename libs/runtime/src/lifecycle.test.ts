import { ModuleRunner, type Module } from './lifecycle.js';
import { createLogger } from './logger.js';

describe('ModuleRunner', () => {
  const log: string[] = [];
  const module = (name: string, failStop = false): Module => {
    let up = false;
    return {
      name,
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
});
