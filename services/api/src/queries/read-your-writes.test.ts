import type { EventStore } from '@ofp/event-store';
import { PROJECTION_CHANNEL } from '@ofp/models';
import type { NotificationListener, Pool, PostgresSession } from '@ofp/runtime';
import { testLogger } from '@ofp/testing';
import { ReadYourWrites, type WrittenStream } from './read-your-writes.js';

describe('ReadYourWrites', () => {
  const listeners = new Map<string, NotificationListener>();
  const session = {
    listen: (channel: string, listener: NotificationListener) => {
      listeners.set(channel, listener);
      return Promise.resolve(() => Promise.resolve());
    },
  } as unknown as PostgresSession;
  const looks: unknown[] = [];
  const pool = {
    query: (config: unknown) => {
      looks.push(config);
      return Promise.resolve({ rows: [] });
    },
  } as unknown as Pool;
  const waits = new ReadYourWrites(pool, {} as EventStore, [], session, testLogger(), {
    timeoutMs: 2_000,
    readTimeoutMs: 2_000,
    pollIntervalMs: 60_000,
  });
  const written = (streamId: string, version: number): WrittenStream => ({
    streamId,
    streamType: 'people',
    orgId: 1,
    version,
    position: { transactionId: '1', position: version },
    changes: [],
  });
  const progress = (payload: string): void => listeners.get(PROJECTION_CHANNEL)!.notify(payload);

  beforeAll(() => waits.start());
  afterAll(() => waits.stop());
  beforeEach(() => (looks.length = 0));

  it("releases a write's wait when the projector names its stream at its version, without a look", async () => {
    let settled: boolean | undefined;
    const wait = waits.settle([written('people-1', 2)], waits.mark()).then((reached) => (settled = reached));
    progress(JSON.stringify({ 'people-1': 1, 'people-9': 4 }));
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled).toBeUndefined();
    progress(JSON.stringify({ 'people-1': 2 }));
    expect(await wait).toBe(true);
    expect(looks).toEqual([]);
  });

  it('looks at the checkpoints when a notification names no stream (a rebuild, a large batch)', async () => {
    const wait = waits.settle([written('people-2', 1)], waits.mark());
    progress('');
    await new Promise((resolve) => setImmediate(resolve));
    expect(looks).toHaveLength(1);
    progress(JSON.stringify({ 'people-2': 1 }));
    expect(await wait).toBe(true);
  });
});
