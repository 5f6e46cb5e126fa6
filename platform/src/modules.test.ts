import { moduleOrder } from '@ofp/runtime';
import { MODULES, TARGETS, type ModuleName } from './modules.js';
import type { Target } from './config.js';

const graph = (target: Target): ModuleName[] => moduleOrder(MODULES, TARGETS[target]);

/** The modules of a service, and those that only a process consuming the bus needs. */
const SERVICES: Record<string, readonly ModuleName[]> = {
  auth: ['auth', 'auth-janitor', 'auth-schema', 'admin-token'],
  api: ['api', 'api-schema', 'process-managers', 'outbox-relay'],
  projector: ['projector'],
  webhooks: ['webhooks', 'webhooks-schema', 'webhook-intake'],
};
const others = (...kept: string[]) =>
  Object.entries(SERVICES)
    .filter(([service]) => !kept.includes(service))
    .flatMap(([, modules]) => modules);

describe('the module graph of each TARGET', () => {
  it('standalone (all) runs every service on one listener, and announces itself last', () => {
    expect(graph('all')).toEqual(expect.arrayContaining(Object.values(SERVICES).flat()));
    expect(graph('all')).not.toContain('admin-http');
    expect(graph('all').slice(-3)).toEqual(['http', 'warm-up', 'standalone']);
  });

  it('warms up after the listener in every process that serves, so that it is ready once warm', () => {
    for (const target of ['all', 'auth', 'api', 'projector', 'webhook-dispatcher'] as const) {
      const modules = graph(target);
      expect(modules.indexOf('warm-up')).toBeGreaterThan(modules.indexOf('http'));
    }
    expect(graph('migrate')).not.toContain('warm-up');
  });

  it('auth builds no Kafka client, no bus, no token verification and no other service', () => {
    const auth = graph('auth');
    for (const name of ['kafka', 'bus', 'token-verification', ...others('auth')] as const)
      expect(auth).not.toContain(name);
    expect(auth).toContain('admin-http');
  });

  it.each([
    ['api', 'api'],
    ['projector', 'projector'],
    ['webhook-dispatcher', 'webhooks'],
  ] as const)('%s builds its own service and none of the others', (target, service) => {
    const modules = graph(target);
    expect(modules).toEqual(expect.arrayContaining([...SERVICES[service]!, 'kafka', 'bus', 'http']));
    for (const name of [...others(service), 'admin-http', 'standalone'] as const)
      expect(modules).not.toContain(name);
  });

  it('migrate lays out every schema and starts nothing else', () => {
    expect(graph('migrate')).toEqual([
      'telemetry',
      'preflight',
      'database',
      'pool',
      'event-store',
      'auth-schema',
      'api-schema',
      'webhooks-schema',
    ]);
  });

  it('checks the settings before anything is created, and Kafka before the database where it is used', () => {
    for (const target of Object.keys(TARGETS) as Target[]) {
      const modules = graph(target);
      expect(modules.indexOf('preflight')).toBeLessThan(modules.indexOf('database'));
      if (modules.includes('kafka'))
        expect(modules.indexOf('kafka')).toBeLessThan(modules.indexOf('database'));
    }
  });

  it('opens the listener after every module whose routes it serves, so it closes before them', () => {
    for (const target of ['all', 'auth', 'api', 'webhook-dispatcher'] as const) {
      const modules = graph(target);
      for (const name of ['auth', 'api', 'webhooks', 'health'] as const)
        if (modules.includes(name)) expect(modules.indexOf(name)).toBeLessThan(modules.indexOf('http'));
    }
  });
});
