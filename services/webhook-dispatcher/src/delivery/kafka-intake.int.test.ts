import { randomUUID } from 'node:crypto';
import { Kafka, KafkaBus, OutboxRelay, kafkaClientConfig } from '@ofp/bus';
import type { StoredEvent } from '@ofp/event-store';
import { startWebhookReceiver, testLogger, type WebhookReceiver } from '@ofp/testing';
import { startDispatcherHarness, type DispatcherHarness } from '../testing/dispatcher-harness.js';

describe('the dispatcher on Kafka (distributed mode)', () => {
  const kafka = new Kafka(
    kafkaClientConfig(process.env.KAFKA_BROKERS!.split(','), 'webhook-dispatcher-test'),
  );
  const topics = {
    prefix: `test.${randomUUID().slice(0, 8)}.`,
    partitions: 2,
    replicationFactor: 1,
    create: true,
  };
  let harness: DispatcherHarness;
  let relay: OutboxRelay;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    harness = await startDispatcherHarness({
      outbox: true,
      bus: () => new KafkaBus(kafka, testLogger(), { topics, batchSize: 500 }),
    });
    relay = new OutboxRelay(kafka, harness.store, testLogger(), {
      session: harness.database.session,
      topics,
      batchSize: 100,
      pollIntervalMs: 100,
      dataSchemaOf: () => 'urn:ofp:schema:record-change:1',
    });
    await relay.start();
  }, 60_000);
  afterAll(async () => {
    await relay.stop();
    await receiver.close();
    await harness.close();
  });

  it('consumes the events from their topics and delivers them signed, in order per record', async () => {
    let secret = '';
    receiver = await startWebhookReceiver({ secrets: () => [secret] });
    secret = (
      await harness.createWebhook(1, { url: receiver.url, events: ['person.created', 'person.updated'] })
    ).secret;
    const events: StoredEvent[] = [];
    for (let version = 1; version <= 3; version++)
      for (const id of [71, 72]) events.push(await harness.appendRecordEvent({ orgId: 1, id, version }));

    await receiver.waitFor((r) => r.length >= events.length, 60_000);
    expect(receiver.received.every((r) => r.verified)).toBe(true);
    expect(new Set(receiver.received.map((r) => r.id))).toEqual(new Set(events.map((e) => e.eventId)));
    for (const id of [71, 72]) {
      const sequences = receiver.received
        .filter((r) => r.payload?.data.id === id)
        .map((r) => r.payload?.sequence);
      expect(sequences).toEqual([1, 2, 3]);
    }
    const first = receiver.received.find((r) => r.id === events[0]!.eventId)!;
    expect(first.payload?.timestamp).toBe(events[0]!.recordedAt.toISOString());
  }, 90_000);
});
