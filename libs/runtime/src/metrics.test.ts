import { jest } from '@jest/globals';
import { Gauge, Registry } from 'prom-client';
import { sharedReading } from './metrics.js';

describe('sharedReading', () => {
  afterEach(() => jest.useRealTimers());

  it('reads once for the gauges of one scrape and again once the reading is older than its age', async () => {
    jest.useFakeTimers({ now: 0 });
    let reads = 0;
    const read = sharedReading(new Registry(), 'count', async () => ++reads, { maxAgeMs: 1_000 });
    expect(await Promise.all([read(), read()])).toEqual([1, 1]);
    jest.setSystemTime(1_000);
    expect(await read()).toBe(1);
    jest.setSystemTime(1_001);
    expect(await read()).toBe(2);
  });

  it('keeps the last value of a reading that fails or hangs, counts the failure, and the scrape goes on', async () => {
    const registry = new Registry();
    let reads = 0;
    let failing: 'reject' | 'hang' | undefined;
    const read = sharedReading(
      registry,
      'lag',
      () =>
        failing === 'reject'
          ? Promise.reject(new Error('Postgres is down'))
          : failing === 'hang'
            ? new Promise<number>(() => {})
            : Promise.resolve(++reads),
      { maxAgeMs: -1, timeoutMs: 100 },
    );
    new Gauge({
      name: 'lag_events',
      help: 'lag',
      registers: [registry],
      async collect() {
        const value = await read();
        if (value !== undefined) this.set(value);
      },
    });
    new Gauge({ name: 'still_here', help: 'another metric', registers: [registry] }).set(1);
    const sample = async (name: string) =>
      (await registry.getMetricsAsJSON()).find((metric) => metric.name === name)?.values ?? [];

    const failures = async () =>
      (await registry.getSingleMetric('metrics_reading_failures_total')!.get()).values;

    expect(await sample('lag_events')).toEqual([expect.objectContaining({ value: 1 })]);
    failing = 'reject';
    expect(await sample('lag_events')).toEqual([expect.objectContaining({ value: 1 })]);
    failing = 'hang';
    expect(await sample('lag_events')).toEqual([expect.objectContaining({ value: 1 })]);
    expect(await failures()).toEqual([expect.objectContaining({ labels: { reading: 'lag' }, value: 2 })]);
    // A whole scrape while the reading hangs: answered, with the other metrics, once the reading times out.
    expect(await registry.metrics()).toContain('still_here 1');
    expect(await failures()).toEqual([expect.objectContaining({ value: 3 })]);
    failing = undefined;
    expect(await sample('lag_events')).toEqual([expect.objectContaining({ value: 2 })]);
  });
});
