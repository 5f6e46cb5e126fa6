// @runs-alone: slows, cuts and heals a broker's network, and times the recovery
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import {
  CACHE_DIR,
  isolatedHost,
  networkNamespacesUnavailable,
  startKafkaCluster,
  testLogger,
  testTopics,
  thingEvent,
  until,
  type IsolatedHost,
  type RunningKafkaCluster,
} from '@ofp/testing';
import type { Subscription } from '../bus.js';
import { createKafkaClient, kafkaConfigShape } from './client.js';
import { toKafkaMessage } from './cloudevents.js';
import { KafkaBus } from './kafka-bus.js';
import type { Admin, Producer } from './kafka-javascript.js';
import { RELAY_PRODUCER } from './outbox-relay.js';
import { topicOf } from './topics.js';

/** One event every this many ms, each to the partition of its key. */
const SEND_EVERY_MS = 50;
const PHASES = { steady: 3_000, slow: 5_000, partitioned: 15_000 };
/**
 * How long a send may wait for its acknowledgement, the consumer for what was acknowledged, and the
 * cut-off node to be back in every partition's in-sync replicas after the heal.
 */
const PRODUCER_BOUND_MS = 30_000;
const CONSUMER_BOUND_MS = 60_000;
const IN_SYNC_BOUND_MS = 30_000;
/** How long a lag reading may take before it counts as unreadable: the metrics' (sharedReading's). */
const READING_TIMEOUT_MS = 2_000;

const unavailable = await networkNamespacesUnavailable();
if (unavailable && process.env.CI === 'true')
  throw new Error(
    `CI=true: the network-fault test needs network namespaces (run CI as root): ${unavailable}`,
  );
const suite = unavailable ? describe.skip : describe;

// Issue 24 item 3: a real network fault between Kafka nodes, not a signal. Node 3 of a three-node
// cluster runs in a network namespace of its own, joined to the others and to this test by a veth
// pair; it leads one of the topic's three partitions and follows the other two. While the outbox
// relay's producer (idempotent, acks=all) sends steadily through the platform's client and the bus's
// consumer group reads, the link is first slowed (a token bucket: delay and drops under load), then
// cut (every packet dropped), then healed. Every acknowledged event is handled, none twice, the
// producer and the consumer go on within their bounds, node 3 is back in sync after the heal, and the
// group's lag goes back to 0.
suite(
  unavailable
    ? `Kafka through network faults: skipped, no network namespaces here (${unavailable})`
    : 'Kafka through network faults',
  () => {
    const logger = testLogger('network-faults');
    let host: IsolatedHost | undefined;
    let cluster: RunningKafkaCluster | undefined;
    let bus: KafkaBus | undefined;
    let subscription: Subscription | undefined;
    let producer: Producer | undefined;
    let admin: Admin | undefined;
    let sending = false;
    // Whatever failed: the namespace goes here, and with the test's process (its janitor) otherwise.
    afterAll(async () => {
      sending = false;
      await subscription?.stop().catch(() => {});
      await bus?.close().catch(() => {});
      await producer?.disconnect().catch(() => {});
      await admin?.disconnect().catch(() => {});
      await cluster?.stop();
      await host?.remove();
    });

    it('loses nothing and moves on through a slow link, a partition and its healing', async () => {
      const startedAt = Date.now();
      host = await isolatedHost();
      const { inside, outside } = host;
      cluster = await startKafkaCluster({
        cacheDir: CACHE_DIR,
        logger,
        nodes: 3,
        placement: (id) => (id === 3 ? inside : outside),
      });
      const clusterStartMs = Date.now() - startedAt;
      // The platform's client (its request timeout), quiet.
      const { kafka } = await createKafkaClient(
        z.object(kafkaConfigShape).parse({ KAFKA_BROKERS: cluster.brokers.join(',') }),
        'network-faults-test',
      );
      const topics = { ...testTopics(3), replicationFactor: 3 };
      const topic = topicOf(topics, 'things');
      // Partition 0 led by node 3, partitions 1 and 2 following it.
      await cluster.createTopic(topic, [
        [3, 1, 2],
        [1, 2, 3],
        [2, 3, 1],
      ]);
      admin = kafka.admin();
      await admin.connect();

      bus = new KafkaBus(kafka, logger, { topics, batchSize: 100 });
      const handled = new Map<string, number>();
      const handledAt: number[] = [];
      subscription = await bus.subscribe({
        group: `network-faults-${randomUUID()}`,
        streamTypes: ['things'],
        handle: async (events) => {
          handledAt.push(Date.now());
          for (const event of events) handled.set(event.eventId, (handled.get(event.eventId) ?? 0) + 1);
        },
      });
      producer = kafka.producer(RELAY_PRODUCER);
      await producer.connect();

      let phase: keyof typeof PHASES | 'healed' = 'steady';
      const acknowledged = new Map<string, { phase: string; ms: number; at: number }>();
      const failed: string[] = [];
      const pending = new Set<Promise<void>>();
      sending = true;
      let sent = 0;
      const sender = (async () => {
        while (sending) {
          const i = sent++;
          const event = thingEvent(`event-${i}`, i);
          const [sentAt, sentIn] = [Date.now(), phase];
          const send = producer
            .send({ topic, messages: [toKafkaMessage(event, 'urn:ofp:schema:things:1')] })
            .then(
              () =>
                void acknowledged.set(event.eventId, {
                  phase: sentIn,
                  ms: Date.now() - sentAt,
                  at: Date.now(),
                }),
              () => void failed.push(event.eventId),
            )
            .finally(() => pending.delete(send));
          pending.add(send);
          await sleep(SEND_EVERY_MS);
        }
      })();

      // The group's lag as its metric reads it (a reading that takes longer than 2 s is unreadable),
      // every second from the cut until the heal, without holding the heal back.
      const lagReadings: string[] = [];
      let readingLag = false;
      const lagReader = async () => {
        while (readingLag) {
          const at = Date.now();
          const reading = await Promise.race([
            bus!.lag().then(
              ([lag]) => String(lag?.events ?? 0),
              () => 'failed',
            ),
            sleep(READING_TIMEOUT_MS, 'unreadable'),
          ]);
          lagReadings.push(`${((at - partitionedAt) / 1000).toFixed(0)}s:${reading}`);
          await sleep(1_000 - (Date.now() - at));
        }
      };
      /** Whether node 3 is in the in-sync replicas of every partition of the topic. */
      const inSync = async () => {
        const [metadata] = await admin!.fetchTopicMetadata({ topics: [topic] });
        return metadata!.partitions.every((partition) => partition.isr.includes(3));
      };

      await sleep(PHASES.steady);
      phase = 'slow';
      await host.slow({ rateKbit: 256, latencyMs: 100 });
      await sleep(PHASES.slow);
      phase = 'partitioned';
      await host.partition();
      const partitionedAt = Date.now();
      readingLag = true;
      const reader = lagReader();
      await sleep(PHASES.partitioned);
      readingLag = false;
      phase = 'healed';
      await host.heal();
      const healedAt = Date.now();
      await until('node 3 back in sync', IN_SYNC_BOUND_MS, () => inSync().catch(() => false), Boolean);
      const inSyncAfterHealMs = Date.now() - healedAt;
      sending = false;
      await sender;
      await Promise.all(pending);
      await reader;

      const ids = [...acknowledged.keys()];
      await until(
        'every acknowledged event handled',
        CONSUMER_BOUND_MS,
        () => ids.filter((id) => !handled.has(id)).length,
        (left) => left === 0,
      );
      // A reading may fail while the group's coordinator settles after the heal (OffsetFetch timed out:
      // "Local: Timed out" in a CI run); the lag's metric counts such a reading as unreadable, and so
      // does this wait, which counts them and reads again.
      let lagReadsFailedAfter = 0;
      const lagAfter = await until(
        'the lag back to 0',
        30_000,
        () =>
          bus!.lag().catch(() => {
            lagReadsFailedAfter++;
            return [];
          }),
        ([lag]) => lag?.events === 0,
      );
      const slowestAck = (of: string) =>
        Math.max(0, ...[...acknowledged.values()].filter((ack) => ack.phase === of).map((ack) => ack.ms));
      const acksAt = [...acknowledged.values()].map((ack) => ack.at).sort((a, b) => a - b);
      const handledGaps = handledAt.slice(1).map((at, i) => at - handledAt[i]!);
      const figures = {
        clusterStartMs,
        sent,
        acknowledged: ids.length,
        failed: failed.length,
        lost: ids.filter((id) => !handled.has(id)).length,
        duplicates: [...handled.values()].filter((times) => times > 1).length,
        slowestAckMs: Object.fromEntries(
          ['steady', 'slow', 'partitioned', 'healed'].map((each) => [each, slowestAck(each)]),
        ),
        // The longest time in which no send was acknowledged, and no batch handled.
        longestAckGapMs: Math.max(...acksAt.slice(1).map((at, i) => at - acksAt[i]!)),
        longestHandledGapMs: Math.max(...handledGaps),
        lagWhilePartitioned: lagReadings.join(' '),
        inSyncAfterHealMs,
        lagAfter: lagAfter[0]?.events,
        lagReadsFailedAfter,
        watchdogRestarts: bus.throughput()[0]?.restarts ?? 0,
        testMs: Date.now() - startedAt,
      };
      process.stdout.write(`network faults: ${JSON.stringify(figures)}\n`);
      // Nothing the consumer could read waited for it: while node 3 is in the in-sync replicas nothing is
      // acknowledged (acks=all), and once it is fenced its partition has a new leader. So the lag stays
      // near 0 and the watchdog, rightly, restarts nothing: the stall is the producer's.
      // Duplicates are printed, not refused: delivery is at least once (API.md §9, handlers deduplicate on
      // ce_id). When the cut isolates the group's coordinator, a batch handled before the cut whose commit
      // could not reach it is handed again after the heal (0 in the first runs, 2 in a CI run on a quiet
      // machine whose lag was unreadable for 12 s of the cut). What may not happen is a loss or a failure.
      expect(figures).toMatchObject({ lost: 0, failed: 0, watchdogRestarts: 0 });
      expect(Math.max(...Object.values(figures.slowestAckMs))).toBeLessThan(PRODUCER_BOUND_MS);
      expect(figures.longestHandledGapMs).toBeLessThan(PRODUCER_BOUND_MS);
    }, 300_000);
  },
);
