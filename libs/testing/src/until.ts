import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Reads `read` every 200 ms until `done` holds for what it read, and resolves with that; rejects after
 * `timeoutMs` with `what` and the last reading, so that a failed wait says what it saw.
 */
export async function until<T>(
  what: string,
  timeoutMs: number,
  read: () => T | Promise<T>,
  done: (value: T) => boolean,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`not within ${timeoutMs} ms: ${what} (last: ${JSON.stringify(value)})`);
    await sleep(200);
  }
}

/** The bus's topic settings for a test of its own: fresh topics, created by the bus, one replica. */
export function testTopics(partitions: number) {
  return { prefix: `test.${randomUUID().slice(0, 8)}.`, partitions, replicationFactor: 1, create: true };
}

/**
 * A stored event of the stream type `things`, number `i`, as the Kafka tests send them: its own stream,
 * so that the events spread over the partitions by key.
 */
export function thingEvent(eventId: string, i: number) {
  return {
    eventId,
    streamId: `thing-${eventId}`,
    streamType: 'things',
    version: 1,
    type: 'thing.changed',
    orgId: 1,
    data: { i },
    metadata: {},
    recordedAt: new Date(),
    position: { transactionId: '1', position: i },
  };
}
