import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Kafka, logLevel } from 'kafkajs';
import { EventStore, migrateEventStore, type StoredEvent } from '@ofp/event-store';
import { createTestDatabase, testLogger, type TestDatabase } from '@ofp/testing';
import type { Subscription } from '../bus.js';
import { KafkaBus } from './kafka-bus.js';

const FIXTURE = fileURLToPath(new URL('./relay-process.fixture.ts', import.meta.url));
const TOTAL = 3000;

describe('OutboxRelay killed mid-batch', () => {
  let db: TestDatabase;
  let subscription: Subscription | undefined;
  const children: ChildProcess[] = [];
  const topics = {
    prefix: `test.${randomUUID().slice(0, 8)}.`,
    partitions: 4,
    replicationFactor: 1,
    create: true,
  };

  beforeAll(async () => {
    db = await createTestDatabase();
    await migrateEventStore(db.pool, testLogger());
  });
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await subscription?.stop();
    await db.drop();
  });

  function startRelay(): ChildProcess {
    const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE], {
      env: { ...process.env, DATABASE_URL: db.url, TOPIC_PREFIX: topics.prefix, BATCH_SIZE: '100' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    children.push(child);
    return child;
  }

  it('loses nothing and keeps per-stream order across a SIGKILL and restart', async () => {
    const store = new EventStore(db.pool, { outbox: true });
    for (let i = 0; i < TOTAL; i += 50) {
      await Promise.all(
        Array.from({ length: 50 }, (_, k) =>
          store.append({
            streamId: `r-${k}`,
            streamType: 'relayed',
            expectedVersion: i / 50,
            orgId: 1,
            events: [{ eventId: randomUUID(), type: 'relayed.n', data: { i: i + k } }],
          }),
        ),
      );
    }

    const received: StoredEvent[] = [];
    const kafka = new Kafka({
      clientId: 'relay-test',
      brokers: process.env.KAFKA_BROKERS!.split(','),
      logLevel: logLevel.NOTHING,
    });
    subscription = await new KafkaBus(kafka, testLogger(), { topics, batchSize: 500 }).subscribe({
      group: `g-${randomUUID()}`,
      streamTypes: ['relayed'],
      handle: async (events) => {
        received.push(...events);
      },
    });
    const waitFor = async (predicate: () => boolean, what: string): Promise<void> => {
      const deadline = Date.now() + 60_000;
      while (!predicate()) {
        if (Date.now() > deadline)
          throw new Error(`timed out waiting for ${what}; received ${received.length}`);
        await new Promise((r) => setTimeout(r, 5));
      }
    };

    const first = startRelay();
    await waitFor(() => received.length >= 300, 'the first relay to publish');
    first.kill('SIGKILL');
    await new Promise((resolve) => first.once('exit', resolve));
    const publishedBeforeKill = received.length;
    expect(publishedBeforeKill).toBeLessThan(TOTAL);

    startRelay();
    await waitFor(
      () => new Set(received.map((e) => e.eventId)).size >= TOTAL,
      'every event after the restart',
    );

    const unique = new Map(received.map((e) => [e.eventId, e]));
    expect(unique.size).toBe(TOTAL);
    const lastVersion = new Map<string, number>();
    for (const event of received) {
      const last = lastVersion.get(event.streamId) ?? 0;
      // A redelivered event may repeat an older version; a new one is always the next.
      expect(event.version).toBeLessThanOrEqual(last + 1);
      lastVersion.set(event.streamId, Math.max(last, event.version));
    }
    expect([...lastVersion.values()]).toEqual(new Array(50).fill(TOTAL / 50));
    expect(await store.readOutbox(10)).toEqual([]);
  }, 120_000);
});
