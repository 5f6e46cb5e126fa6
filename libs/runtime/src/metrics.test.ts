import { jest } from '@jest/globals';
import { sharedReading } from './metrics.js';

describe('sharedReading', () => {
  afterEach(() => jest.useRealTimers());

  it('reads once for the gauges of one scrape and again once the reading is older than its age', async () => {
    jest.useFakeTimers({ now: 0 });
    let reads = 0;
    const read = sharedReading(async () => ++reads, 1_000);
    expect(await Promise.all([read(), read()])).toEqual([1, 1]);
    jest.setSystemTime(1_000);
    expect(await read()).toBe(1);
    jest.setSystemTime(1_001);
    expect(await read()).toBe(2);
  });
});
