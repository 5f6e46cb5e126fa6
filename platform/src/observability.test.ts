import { setTimeout as sleep } from 'node:timers/promises';
import { Registry } from 'prom-client';
import type { Bus, ConsumerLag } from '@ofp/bus';
import { registerFlowMetrics } from './observability.js';

/** The metrics text a scrape of `registry` answers, without its HELP and TYPE lines. */
async function scrape(registry: Registry): Promise<string[]> {
  return (await registry.metrics()).split('\n').filter((line) => line !== '' && !line.startsWith('#'));
}

describe('the bus lag gauges', () => {
  it('are left out of a scrape whose lag reading failed, not kept at their last value', async () => {
    let reading: () => Promise<ConsumerLag[]> = async () => [{ group: 'projector', events: 5, seconds: 3 }];
    // The part of a bus the flow metrics read.
    const bus = { lag: () => reading(), throughput: () => [] } as unknown as Bus;
    const registry = new Registry();
    registerFlowMetrics(registry, bus);

    expect(await scrape(registry)).toEqual(
      expect.arrayContaining([
        'bus_consumer_lag_events{group="projector"} 5',
        'bus_consumer_lag_seconds{group="projector"} 3',
        'metrics_reading_failures_total{reading="bus_lag"} 0',
      ]),
    );
    reading = () => Promise.reject(new Error('Local: Timed out'));
    // A reading is shared by the scrapes of one second.
    await sleep(1_100);
    const lines = await scrape(registry);
    expect(lines.filter((line) => line.startsWith('bus_consumer_lag_'))).toEqual([]);
    // (Counted as the scrape reads the gauges, after the counter itself was read: the next scrape shows it.)
    const failures = await registry.getSingleMetric('metrics_reading_failures_total')!.get();
    expect(failures.values).toEqual([{ labels: { reading: 'bus_lag' }, value: 1 }]);
  });
});
