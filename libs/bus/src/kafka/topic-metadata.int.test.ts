// @runs-alone: a new topic taken into a group within the metadata refresh, timed
import { randomUUID } from 'node:crypto';
import { testLogger, testTopics, thingEvent, until } from '@ofp/testing';
import type { Subscription } from '../bus.js';
import { toKafkaMessage } from './cloudevents.js';
import { KafkaBus } from './kafka-bus.js';
import { kafkaClientConfig } from './client.js';
import { Kafka, type Admin, type Consumer, type Producer } from './kafka-javascript.js';
import { unconfirmedPartitions } from './outbox-relay.js';
import { topicOf } from './topics.js';

// A consumer leaves a subscribed topic its metadata does not show out of its group's assignment until
// it asks for the metadata again, which librdkafka does every 5 minutes by default: a consumer that
// started while a broker had not yet applied a topic's creation read only the other topics (a
// projector replica of the chaos run, seed 1648338865). The bus's consumers ask every 10 s. Here a
// topic of a subscription goes (deleted, so the group drops it) and comes back (created again): its
// events are handled within 10 s and a rejoin; asked every 5 minutes, they wait (the test fails).
// Its sends check their offsets as the outbox relay does: sent 20 ms after the topic's creation, one
// send in two had a message acknowledged without an offset and missing from its partition, and the
// test waited for it in vain (unconfirmedPartitions).
/** The Kafka client, with every consumer it makes kept for the test: real consumers, not stand-ins. */
class WatchedKafka extends Kafka {
  readonly consumers: Consumer[] = [];
  override consumer(...args: Parameters<Kafka['consumer']>): Consumer {
    const consumer = super.consumer(...args);
    this.consumers.push(consumer);
    return consumer;
  }
}

describe('a Kafka consumer whose subscribed topic appears after it joined', () => {
  const kafka = new WatchedKafka(
    kafkaClientConfig((process.env.KAFKA_BROKERS ?? '').split(',').filter(Boolean), 'topic-metadata-test'),
  );
  const topics = testTopics(2);
  const bus = new KafkaBus(kafka, testLogger('topic-metadata'), { topics, batchSize: 100 });
  let subscription: Subscription | undefined;
  let producer: Producer | undefined;
  let admin: Admin | undefined;
  afterAll(async () => {
    await subscription?.stop();
    await bus.close();
    await producer?.disconnect();
    await admin?.disconnect();
  });

  it('takes the topic into its group once it exists, within the metadata refresh', async () => {
    const handled = new Set<string>();
    subscription = await bus.subscribe({
      group: `topic-metadata-${randomUUID()}`,
      streamTypes: ['things', 'gadgets'],
      handle: async (events) => {
        for (const event of events) handled.add(event.eventId);
      },
    });
    producer = kafka.producer({ kafkaJS: { idempotent: true, acks: -1 }, 'linger.ms': 0 });
    await producer.connect();
    admin = kafka.admin();
    await admin.connect();
    const gadgets = topicOf(topics, 'gadgets');
    const send = async (name: string, streamType: string): Promise<string[]> => {
      const events = Array.from({ length: 5 }, (_, i) => ({ ...thingEvent(`${name}-${i}`, i), streamType }));
      const sent = await producer!.send({
        topic: topicOf(topics, streamType),
        messages: events.map((event) => toKafkaMessage(event, 'urn:ofp:schema:things:1')),
      });
      const unconfirmed = unconfirmedPartitions(sent);
      if (unconfirmed.length > 0) throw new Error(`${unconfirmed.join(', ')} without an offset`);
      return events.map((event) => event.eventId);
    };
    const allHandled = (ids: string[]) => async () => ids.filter((id) => !handled.has(id)).length;
    const before = await send('before', 'things');
    await until('the events before handled', 30_000, allHandled(before), (left) => left === 0);
    // (No events on gadgets before it goes: the group's offsets on the old topic would skip the new one's.)
    const consumer = kafka.consumers.at(-1)!;
    const holdsGadgets = () => consumer.assignment().some(({ topic }) => topic === gadgets);
    expect(holdsGadgets()).toBe(true);

    await admin.deleteTopics({ topics: [gadgets] });
    await until('the group without the topic', 60_000, holdsGadgets, (holds) => !holds);
    // The other topic keeps moving meanwhile.
    const during = await send('during', 'things');
    await until('the other topic handled', 30_000, allHandled(during), (left) => left === 0);
    await admin.createTopics({ topics: [{ topic: gadgets, numPartitions: 2, replicationFactor: 1 }] });
    const createdAt = Date.now();
    const after = await until(
      'events sent to the topic again',
      30_000,
      () => send('after', 'gadgets').catch(() => undefined),
      (ids) => ids !== undefined,
    );
    await until(
      'the events of the topic created again handled',
      45_000,
      allHandled(after!),
      (left) => left === 0,
    );
    process.stdout.write(
      `a subscribed topic created again was consumed ${Date.now() - createdAt} ms after its creation\n`,
    );
  }, 150_000);
});
