import { xoroshiro128plus } from 'pure-rand/generator/xoroshiro128plus';
import { checkCutAnswers } from './checks.js';
import { FAULT_KINDS, NETWORK_FAULT_KINDS, scheduleFaults } from './faults.js';
import { emptyTally } from './workload.js';

const REPLICAS = [
  'auth',
  'auth-2',
  'api',
  'api-2',
  'projector',
  'projector-2',
  'webhook-dispatcher',
  'webhook-dispatcher-2',
];

describe("the chaos run's schedule", () => {
  it('draws the same default schedule for a seed as before the network faults existed', () => {
    // CI's seed of docs/chaos.md's table, as drawn before the Postgres link faults were added.
    const faults = scheduleFaults(
      xoroshiro128plus(113431331),
      150_000,
      REPLICAS,
      [1, 2, 3],
      30_000,
      FAULT_KINDS,
    );
    expect(faults.slice(0, 4)).toEqual([
      { kind: 'pause-broker', atMs: 10_000, target: '1', holdMs: 14_074 },
      { kind: 'kill-replica', atMs: 30_557, target: 'webhook-dispatcher', holdMs: 2_276 },
      { kind: 'restart-postgres', atMs: 38_022, target: 'postgres', holdMs: 0 },
      { kind: 'kill-broker', atMs: 44_617, target: '1', holdMs: 8_300 },
    ]);
  });

  it.each([1, 2, 3, 42, 1651760024])(
    'with --faults network (seed %i), draws every kind and its link within bounds',
    (seed) => {
      const kinds = [...FAULT_KINDS, ...NETWORK_FAULT_KINDS];
      const faults = scheduleFaults(xoroshiro128plus(seed), 300_000, REPLICAS, [1, 2, 3], 30_000, kinds, 3);
      expect(new Set(faults.map((fault) => fault.kind))).toEqual(new Set(kinds));
      for (const fault of faults) {
        if (fault.kind === 'cut-api-postgres') expect(fault.target).toMatch(/^api(-2)?$/);
        if (fault.kind === 'partition-broker') expect(fault.target).toBe('3');
        if (fault.kind === 'slow-postgres' || fault.kind === 'slow-kafka') {
          expect(fault.link).toEqual({ latencyMs: expect.any(Number), jitterMs: expect.any(Number) });
          const { latencyMs, jitterMs } = fault.link as { latencyMs: number; jitterMs: number };
          expect([latencyMs >= 200 && latencyMs <= 500, jitterMs >= 20 && jitterMs <= 150]).toEqual([
            true,
            true,
          ]);
        }
        if (fault.kind === 'reset-postgres' || fault.kind === 'reset-kafka') {
          const { resetAfterMs, toxicity } = fault.link as { resetAfterMs: number; toxicity: number };
          expect([resetAfterMs >= 0 && resetAfterMs <= 2_000, toxicity >= 0.2 && toxicity <= 0.6]).toEqual([
            true,
            true,
          ]);
        }
        if (/^(slow|reset)-/.test(fault.kind))
          expect(fault.target).toBe(fault.kind.endsWith('kafka') ? 'kafka links' : 'postgres links');
        else expect(fault.link).toBeUndefined();
      }
      // The same seed, the same schedule.
      expect(scheduleFaults(xoroshiro128plus(seed), 300_000, REPLICAS, [1, 2, 3], 30_000, kinds, 3)).toEqual(
        faults,
      );
    },
  );
});

describe('failures answered in time while an api is cut from Postgres', () => {
  const slow = (sentAt: number, ms: number) => ({
    request: 'POST /v2/people {}',
    sentAt,
    ms,
    ended: 'TimeoutError',
  });

  it('counts a slow failure that overlaps a cut, not one before or after it', () => {
    const tally = emptyTally();
    const hostile = emptyTally();
    tally.slowFailures.push(slow(1_000, 6_000), slow(20_000, 10_000), slow(50_000, 5_500));
    hostile.slowFailures.push(slow(29_000, 7_000));
    const check = checkCutAnswers([tally, hostile], [{ fromMs: 10_000, untilMs: 30_000 }]);
    expect(check.failures).toEqual({ slower: 2 });
    expect(check.examples).toEqual([slow(20_000, 10_000), slow(29_000, 7_000)]);
    expect(checkCutAnswers([tally, hostile], []).failures).toEqual({ slower: 0 });
  });
});
