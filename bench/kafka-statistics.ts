/**
 * What librdkafka's statistics cost a process (docs/kafka.md, "Reconnection storms"): the CPU (user +
 * system of the process, librdkafka's threads included) of a process holding the clients a platform
 * process holds, with nothing to read or send, for BENCH_SECONDS (60) each: a KafkaBus consumer group
 * over BENCH_TOPICS (12) topics of 6 partitions (the projector's shape), the outbox relay's producer and
 * an admin client, made by createKafkaClient as the platform makes them. Its baseline is the same
 * process with the statistics off; the other runs report as the platform's do (every 10 s,
 * STATISTICS_INTERVAL_MS; the admin clients every second, ADMIN_STATISTICS_INTERVAL_MS) and every 100 ms (a hundred times more reports, so that one report's cost
 * stands out of the idle clients' own). Each run is a process of its own on the harness's broker, the
 * settings alternated BENCH_ROUNDS (3) times; the CPU counted starts once the group has its partitions.
 *
 *   npm run bench:kafka-statistics
 */
import { fileURLToPath } from 'node:url';
import { loadavg } from 'node:os';
import { z } from 'zod';
import {
  KafkaBus,
  KafkaStatistics,
  ADMIN_STATISTICS_INTERVAL_MS,
  RELAY_PRODUCER,
  STATISTICS_INTERVAL_MS,
  createKafkaClient,
  kafkaConfigShape,
  topicOf,
  type KafkaClientRole,
  type TopicSettings,
} from '@ofp/bus';
import { createLogger } from '@ofp/runtime';
import { CACHE_DIR, startKafkaBroker, testLogger } from '@ofp/testing';
import { createBenchTopics, printResult, runInProcess } from './kafka-bench.js';
import { median } from './measure.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 60);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const TOPICS = Number(process.env.BENCH_TOPICS ?? 12);
/** The statistics intervals measured, 0 for none: the baseline, the platform's, and a hundred times it. */
const INTERVALS = [0, STATISTICS_INTERVAL_MS, STATISTICS_INTERVAL_MS / 100] as const;

interface Result {
  readonly intervalMs: number;
  readonly seconds: number;
  readonly cpuMs: number;
  /** Reports per kind of client, and their bytes of JSON. */
  readonly reports: Record<KafkaClientRole, { count: number; bytes: number }>;
}

const ROLES: readonly KafkaClientRole[] = ['consumer', 'producer', 'admin'];

/** The platform's statistics, with the reports counted. */
class CountedStatistics extends KafkaStatistics {
  reports = Object.fromEntries(ROLES.map((role) => [role, { count: 0, bytes: 0 }])) as Result['reports'];
  override record(role: KafkaClientRole, json: string): void {
    this.reports[role].count++;
    this.reports[role].bytes += json.length;
    super.record(role, json);
  }
}

const streamTypes = Array.from({ length: TOPICS }, (_, i) => `stream${i}`);

/** One run, in this process: the clients made, the group joined, then the CPU of SECONDS idle. */
async function run(intervalMs: number): Promise<Result> {
  const topics = JSON.parse(process.env.BENCH_KAFKA_TOPICS!) as TopicSettings;
  const logger = createLogger({ name: 'bench-kafka-statistics', level: 'warn' });
  const statistics = intervalMs > 0 ? new CountedStatistics(intervalMs) : undefined;
  const { kafka } = await createKafkaClient(
    z.object(kafkaConfigShape).parse({ KAFKA_BROKERS: process.env.KAFKA_BROKERS }),
    'bench-kafka-statistics',
    logger,
    statistics,
  );
  const bus = new KafkaBus(kafka, logger, { topics, batchSize: 500 });
  const subscription = await bus.subscribe({
    group: `bench-kafka-statistics-${intervalMs}-${process.pid}`,
    streamTypes,
    handle: () => Promise.resolve(),
  });
  const deadline = Date.now() + 30_000;
  while (!bus.throughput().some((group) => group.assignments > 0) && Date.now() < deadline)
    await new Promise((resolve) => setTimeout(resolve, 200));
  const producer = kafka.producer(RELAY_PRODUCER);
  await producer.connect();
  const admin = kafka.admin();
  await admin.connect();
  await admin.listTopics();
  const before = structuredClone(statistics?.reports);
  const cpu = process.cpuUsage();
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, SECONDS * 1000));
  const used = process.cpuUsage(cpu);
  const seconds = (performance.now() - started) / 1000;
  const reports = Object.fromEntries(
    ROLES.map((role) => [
      role,
      {
        count: (statistics?.reports[role].count ?? 0) - (before?.[role].count ?? 0),
        bytes: (statistics?.reports[role].bytes ?? 0) - (before?.[role].bytes ?? 0),
      },
    ]),
  ) as Result['reports'];
  await admin.disconnect();
  await producer.disconnect();
  await subscription.stop();
  await bus.close();
  return {
    intervalMs,
    seconds,
    cpuMs: (used.user + used.system) / 1000,
    reports,
  };
}

const only = process.argv[2];
if (only !== undefined) {
  printResult(await run(Number(only)));
  process.exit(0);
}

const logger = testLogger('bench-kafka-statistics');
const broker = await startKafkaBroker({ cacheDir: CACHE_DIR, logger });
try {
  const topics = await createBenchTopics(broker.brokers, 'bench-kafka-statistics', (each) =>
    streamTypes.map((streamType) => topicOf(each, streamType)),
  );
  const environment = { KAFKA_BROKERS: broker.brokers.join(','), BENCH_KAFKA_TOPICS: JSON.stringify(topics) };
  const results: Result[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    for (const intervalMs of INTERVALS) {
      process.stderr.write(
        `bench:kafka-statistics: round ${round}, statistics ${intervalMs || 'off'} (load ${loadavg()[0]!.toFixed(1)})\n`,
      );
      results.push(
        await runInProcess<Result>(fileURLToPath(import.meta.url), String(intervalMs), environment),
      );
    }
  }
  const cpuPerMinute = (each: Result) => (each.cpuMs / each.seconds) * 60;
  const reportCount = (each: Result) => ROLES.reduce((sum, role) => sum + each.reports[role].count, 0);
  const label = (intervalMs: number) =>
    intervalMs ? `${intervalMs} ms, admin ${Math.min(intervalMs, ADMIN_STATISTICS_INTERVAL_MS)} ms` : 'off';
  const baseline = median(results.filter((each) => each.intervalMs === 0).map(cpuPerMinute));
  console.table(
    results.map((each) => ({
      statistics: label(each.intervalMs),
      'CPU ms / min': Math.round(cpuPerMinute(each)),
      'vs off': (cpuPerMinute(each) / baseline).toFixed(3),
      ...Object.fromEntries(
        ROLES.flatMap((role): [string, number | string][] => {
          const { count, bytes } = each.reports[role];
          return [
            [`${role} reports`, count],
            [`${role} KB / report`, count ? (bytes / count / 1024).toFixed(1) : '-'],
          ];
        }),
      ),
    })),
  );
  for (const intervalMs of INTERVALS.filter(Boolean)) {
    const runs = results.filter((each) => each.intervalMs === intervalMs);
    const extra = median(runs.map(cpuPerMinute)) - baseline;
    const reportsPerMinute = median(runs.map((each) => (reportCount(each) / each.seconds) * 60));
    console.log(
      `statistics ${label(intervalMs)}: median ${median(runs.map(cpuPerMinute)).toFixed(0)} CPU ms / min against ${baseline.toFixed(0)} off (${((extra / 60_000) * 100).toFixed(3)}% of a core)` +
        (reportsPerMinute > 0 ? `, ${((extra / reportsPerMinute) * 1000).toFixed(0)} µs per report` : ''),
    );
  }
} finally {
  await broker.stop();
}
