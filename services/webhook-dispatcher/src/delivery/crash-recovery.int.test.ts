// @runs-alone: kills the dispatcher mid-batch and counts what the next one delivers
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from '@ofp/testing';
import { startDispatcherHarness, type DispatcherHarness } from '../testing/dispatcher-harness.js';

const FIXTURE = fileURLToPath(new URL('../testing/dispatcher-process.fixture.ts', import.meta.url));
const RECORDS = 50;
const VERSIONS = 30;
const TOTAL = RECORDS * VERSIONS;

describe('a dispatcher killed with SIGKILL mid-batch', () => {
  let harness: DispatcherHarness;
  let receiver: WebhookReceiver;
  const children: ChildProcess[] = [];
  let crashed: Error | undefined;

  beforeAll(async () => {
    // Only the routes here: the dispatcher under test runs in a child process.
    harness = await startDispatcherHarness({ start: false });
  });
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await receiver.close();
    await harness.close();
  });

  function startDispatcher(): ChildProcess {
    const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE], {
      env: { ...process.env, DATABASE_URL: harness.database.url },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    child.once('exit', (code, signal) => {
      if (signal !== 'SIGKILL') crashed = new Error(`the dispatcher exited on its own (${code ?? signal})`);
    });
    children.push(child);
    return child;
  }

  it('delivers every event at least once after a restart, duplicates with the same webhook-id', async () => {
    let secret = '';
    // Slow answers keep a batch in flight when the kill comes.
    receiver = await startWebhookReceiver({
      secrets: () => [secret],
      answer: () => ({ status: 204, delayMs: 30 }),
    });
    secret = (await harness.createWebhook(1, { url: receiver.url, events: ['*'] })).secret;
    const eventIds = new Set<string>();
    for (let version = 1; version <= VERSIONS; version++) {
      await Promise.all(
        Array.from({ length: RECORDS }, async (_, n) => {
          const event = await harness.appendRecordEvent({ orgId: 1, id: 5000 + n, version });
          eventIds.add(event.eventId);
        }),
      );
    }
    const unique = (): number => new Set(receiver.received.map((r) => r.id)).size;
    const waitFor = async (predicate: () => boolean, what: string): Promise<void> => {
      const deadline = Date.now() + 90_000;
      while (!predicate()) {
        if (crashed) throw crashed;
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; ${unique()} delivered`);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    };

    const first = startDispatcher();
    await waitFor(() => unique() >= 300 && receiver.inFlight() >= 10, 'the first dispatcher to be mid-batch');
    first.kill('SIGKILL');
    await new Promise((resolve) => first.once('exit', resolve));
    expect(unique()).toBeLessThan(TOTAL);

    startDispatcher();
    await waitFor(() => unique() >= TOTAL, 'every event after the restart');
    await new Promise((resolve) => setTimeout(resolve, 300));

    const received = receiver.received;
    expect(received.every((r) => r.verified)).toBe(true);
    expect(new Set(received.map((r) => r.id))).toEqual(eventIds);
    // Duplicates are the same delivery again: the same webhook-id, the same body.
    const byId = new Map<string, ReceivedWebhook[]>();
    for (const r of received) byId.set(r.id, [...(byId.get(r.id) ?? []), r]);
    const duplicated = [...byId.values()].filter((copies) => copies.length > 1);
    // The requests in flight at the kill were never recorded: they went out again.
    expect(duplicated.length).toBeGreaterThan(0);
    for (const copies of duplicated) expect(new Set(copies.map((c) => c.body)).size).toBe(1);
    // Per record, a later version never arrives before an earlier one (a repeat may follow its original).
    const last = new Map<unknown, number>();
    for (const r of received) {
      const record = r.payload!.data.id;
      const sequence = r.payload!.sequence;
      expect(sequence).toBeGreaterThanOrEqual(last.get(record) ?? 0);
      last.set(record, sequence);
    }
    expect([...last.values()]).toEqual(new Array(RECORDS).fill(VERSIONS));

    const { rows } = await harness.database.pool.query<{ status: string; n: number }>(
      'SELECT status, count(*)::int AS n FROM webhooks.webhook_deliveries GROUP BY status',
    );
    expect(rows).toEqual([{ status: 'succeeded', n: TOTAL }]);
  }, 180_000);
});
