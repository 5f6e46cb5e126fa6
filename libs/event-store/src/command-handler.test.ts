import { randomUUID } from 'node:crypto';
import { baseError } from '@ofp/contracts';
import type { PoolClient } from '@ofp/runtime';
import { handleCommand, type Command, type CommandStore, type Decided } from './command-handler.js';
import { WrongExpectedVersion } from './errors.js';
import type { AppendInput, AppendResult } from './event-store.js';

/** Streams' versions in memory, appended to as the event store does: all at their versions, or none. */
class MemoryStreams implements CommandStore {
  readonly versions = new Map<string, number>();
  appended = 0;

  appendToStreams(
    inputs: readonly AppendInput[],
    alsoInTransaction?: (client: PoolClient, results: readonly AppendResult[]) => Promise<void>,
  ): Promise<AppendResult[]> {
    const stale = inputs.find((input) => (this.versions.get(input.streamId) ?? 0) !== input.expectedVersion);
    if (stale) return Promise.reject(new WrongExpectedVersion(stale.streamId, stale.expectedVersion));
    const results = inputs.map((input) => {
      const version = input.expectedVersion + input.events.length;
      this.versions.set(input.streamId, version);
      this.appended += input.events.length;
      return { version, position: { transactionId: '1', position: this.appended } };
    });
    return (alsoInTransaction?.({} as PoolClient, results) ?? Promise.resolve()).then(() => results);
  }
}

/** One event on stream `s-1` at the version loaded, the outcome the version it reached. */
function increment(version: number): Decided<number> {
  return {
    appends: [
      {
        streamId: 's-1',
        streamType: 's',
        expectedVersion: version,
        orgId: 1,
        events: [{ eventId: randomUUID(), type: 's.incremented', data: { from: version } }],
      },
    ],
    outcome: (results) => results.get('s-1')!.version,
  };
}

describe('handleCommand', () => {
  it('loads and decides again on the new state when another writer appended first', async () => {
    const streams = new MemoryStreams();
    const loaded: number[] = [];
    const decided: number[] = [];
    const command: Command<number, number> = {
      load: () => {
        const version = streams.versions.get('s-1') ?? 0;
        loaded.push(version);
        // Another writer appends between the first load and its append.
        if (loaded.length === 1) streams.versions.set('s-1', version + 1);
        return Promise.resolve(version);
      },
      decide: (version) => {
        decided.push(version);
        return increment(version);
      },
    };
    await expect(handleCommand(streams, command)).resolves.toBe(2);
    expect(loaded).toEqual([0, 1]);
    expect(decided).toEqual([0, 1]);
    expect(streams.appended).toBe(1);
  });

  it('appends nothing and runs nothing in the transaction when the decision refuses', async () => {
    const streams = new MemoryStreams();
    const refusal = baseError('Unprocessable', 'not now');
    let inTransaction = false;
    const command: Command<number, number> = {
      load: () => Promise.resolve(0),
      decide: () => {
        throw refusal;
      },
    };
    await expect(handleCommand(streams, command)).rejects.toBe(refusal);
    const checked: Command<number, number> = {
      load: () => Promise.resolve(0),
      decide: (version) => ({
        ...increment(version),
        alsoInTransaction: () => {
          inTransaction = true;
          return Promise.resolve();
        },
      }),
      check: () => Promise.reject(refusal),
    };
    await expect(handleCommand(streams, checked)).rejects.toBe(refusal);
    expect(streams.appended).toBe(0);
    expect(inTransaction).toBe(false);
  });

  it('commits what goes with a decision of no event, in a transaction of its own', async () => {
    const streams = new MemoryStreams();
    let recorded: string | undefined;
    const outcome = await handleCommand(streams, {
      load: () => Promise.resolve('unchanged'),
      decide: (state) => ({
        appends: [],
        alsoInTransaction: () => {
          recorded = state;
          return Promise.resolve();
        },
        outcome: () => state,
      }),
    });
    expect([outcome, recorded, streams.appended]).toEqual(['unchanged', 'unchanged', 0]);
  });

  it("stops at a race that onRace says is the caller's to lose, and gives up after maxAttempts", async () => {
    const streams = new MemoryStreams();
    streams.versions.set('s-1', 5);
    let loads = 0;
    const stale: Command<number, number> = {
      load: () => Promise.resolve(++loads && 0),
      decide: increment,
    };
    const pinned = baseError('PreconditionFailed', 'If-Match no longer matches');
    await expect(
      handleCommand(streams, {
        ...stale,
        onRace: () => {
          throw pinned;
        },
      }),
    ).rejects.toBe(pinned);
    expect(loads).toBe(1);
    await expect(handleCommand(streams, { ...stale, maxAttempts: 3 })).rejects.toBeInstanceOf(
      WrongExpectedVersion,
    );
    expect(loads).toBe(4);
    expect(streams.appended).toBe(0);
  });
});
