/**
 * The chaos run (issue 18): the distributed shape with replicas of every service behind load
 * balancers, on a Kafka cluster of three brokers, under a mixed workload, while a scheduler drawn from
 * a seed kills and restarts replicas, pauses one past the Kafka session timeout, kills a broker and
 * brings it back, freezes one, crashes Postgres, and with `--faults network` cuts a broker off the
 * network (its own network namespace; as root), slows, resets and cuts the platform's links to
 * Postgres (a Toxiproxy proxy per process; one api replica cut while the others reach it), and slows
 * and resets its links to the brokers (a proxy per broker, advertised on a listener of the platform's). Then, with the platform quiet, it checks that nothing was lost,
 * duplicated, reordered or left stale, and prints the counts, the recovery times and the largest lag.
 *
 *   npm run chaos                                  150 s of faults, a seed drawn at random
 *   npm run chaos -- --seed 42 --duration 600      the same schedule again, for longer
 *   npm run chaos -- --replicas 3 --brokers 3 --writers 8 --hostile-writers 2
 *   npm run chaos -- --session-timeout 10         KAFKA_SESSION_TIMEOUT_MS of 10 s (30 by default)
 *   npm run chaos -- --faults network --duration 300   also the network faults (as root)
 *
 * Everything runs on loopback (with --faults network, one broker behind a veth pair, Postgres and the
 * brokers behind Toxiproxy) and is stopped at
 * the end (Postgres in .cache/chaos-postgres, deleted).
 * Exits with 1 when a check fails. docs/chaos.md.
 */
import { createWriteStream } from 'node:fs';
import { mkdir, realpath, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { pino } from 'pino';
import { xoroshiro128plus } from 'pure-rand/generator/xoroshiro128plus';
import { Kafka, kafkaClientConfig } from '@ofp/bus';
import { PROCESS_MANAGER_SUBSCRIPTIONS } from '@ofp/api';
import { PROJECTED_STREAM_TYPES, PROJECTOR_GROUP } from '@ofp/projector';
import { createPool } from '@ofp/runtime';
import { startEmbeddedPostgres } from '@ofp/standalone';
import { INTAKE_GROUP, intakeStreamTypes } from '@ofp/webhook-dispatcher';
import {
  CACHE_DIR,
  UNLIMITED_RATE,
  createIntegrator,
  freePort,
  isolatedHost,
  networkNamespacesUnavailable,
  startKafkaCluster,
  startPlatform,
  startToxiproxy,
  startWebhookReceiver,
  stopPostgresWithThisProcess,
  type WebhookReceiver,
} from '@ofp/testing';
import {
  checkCutAnswers,
  checkExits,
  checkInventory,
  checkPeople,
  checkReadModel,
  checkHostile,
  checkInternalErrors,
  checkWebhooks,
  checkWrites,
  organizationEvents,
  type Check,
} from './chaos/checks.js';
import { logSummary } from './chaos/log-summary.js';
import {
  FAULT_KINDS,
  LagSampler,
  NETWORK_FAULT_KINDS,
  carryOut,
  scheduleFaults,
  type FaultOutcome,
} from './chaos/faults.js';
import { ChaosClient, HostileWriter, Writer, emptyTally, type HostileTally } from './chaos/workload.js';

const { values: args } = parseArgs({
  options: {
    seed: { type: 'string' },
    duration: { type: 'string', default: '150' },
    replicas: { type: 'string', default: '2' },
    brokers: { type: 'string', default: '3' },
    writers: { type: 'string', default: '6' },
    'hostile-writers': { type: 'string', default: '1' },
    'session-timeout': { type: 'string', default: '30' },
    faults: { type: 'string' },
  },
});
const positive = (name: keyof typeof args, value: string | undefined): number => {
  const number = Number(value);
  if (!Number.isInteger(number) || number < 1) {
    console.error(`--${name}: must be a positive integer, not ${value}`);
    process.exit(2);
  }
  return number;
};
const seed = args.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : positive('seed', args.seed);
const durationMs = positive('duration', args.duration) * 1000;
const replicas = positive('replicas', args.replicas);
const brokers = positive('brokers', args.brokers);
const writerCount = positive('writers', args.writers);
/** Of the writers, those that send hostile values (issue 23): any but the last ordinary one. */
const hostileCount = Number(args['hostile-writers']);
if (!Number.isInteger(hostileCount) || hostileCount < 0 || hostileCount >= writerCount) {
  console.error(`--hostile-writers: an integer from 0 to --writers - 1, not ${args['hostile-writers']}`);
  process.exit(2);
}
/** `--faults network` adds the network faults to the schedule (as root: network namespaces). */
if (args.faults !== undefined && args.faults !== 'network') {
  console.error(`--faults: network (the default kinds and the network faults), not ${args.faults}`);
  process.exit(2);
}
const networkFaults = args.faults === 'network';
/** The consumers' KAFKA_SESSION_TIMEOUT_MS; a pause outlasts it. */
const sessionTimeoutMs = positive('session-timeout', args['session-timeout']) * 1000;
const TOPIC_PREFIX = 'chaos.';
/** How long the platform may take to be quiet once the faults are over. */
const QUIET_TIMEOUT_MS = 240_000;
/** How many of the platform log's most frequent warnings and errors a failed run prints. */
const LOG_SUMMARY_LINES = 12;

const log = (line: string): void => console.log(`[chaos ${new Date().toISOString().slice(11, 19)}] ${line}`);
log(
  `seed ${seed}: ${durationMs / 1000} s of faults, ${replicas} replicas of every service, ${brokers} brokers, ${writerCount} writers (${hostileCount} hostile), session timeout ${sessionTimeoutMs / 1000} s`,
);
const random = xoroshiro128plus(seed);
const logger = pino({ name: 'chaos', level: process.env.CHAOS_LOG_LEVEL ?? 'warn' });
const cleanups: (() => Promise<void>)[] = [];

/** The cluster folder, and where it lies as root (docs/operations.md, "Starting"). */
async function removeCluster(dataDir: string): Promise<void> {
  const cluster = await realpath(dataDir).catch(() => undefined);
  if (cluster !== undefined) await rm(cluster, { recursive: true, force: true });
  await rm(dataDir, { recursive: true, force: true });
  for (const file of ['.lock', '.password']) await rm(`${dataDir}${file}`, { force: true });
}

let failed = false;
// Ctrl-C or a supervisor's SIGTERM: stop everything this run started (the platform's processes would
// otherwise outlive it), then exit.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    log(`${signal}: stopping everything`);
    void (async () => {
      for (const cleanup of cleanups) await cleanup().catch(() => {});
      process.exit(130);
    })();
  });
}
try {
  const dataDir = join(CACHE_DIR, 'chaos-postgres');
  await removeCluster(dataDir);
  // Durable, as production's: an ephemeral cluster (synchronous_commit off) loses the last commits
  // when its postmaster is killed, while Kafka already has their events.
  const postgres = await startEmbeddedPostgres({ dataDir, port: await freePort(), logger });
  // Stopped and deleted whichever way this run ends: by its cleanups below, else (a crash, SIGKILL)
  // once it is gone. Its brokers and their namespace have lifelines of their own, its platform
  // processes die with it (startPlatform).
  const leftovers = [postgres.location, dataDir, `${dataDir}.lock`, `${dataDir}.password`];
  const postgresLifeline = stopPostgresWithThisProcess(postgres.location, leftovers);
  cleanups.unshift(async () => {
    await postgres.stop();
    await removeCluster(dataDir);
    postgresLifeline.end();
  });
  const server = new pg.Client({ connectionString: postgres.url });
  await server.connect();
  await server.query('CREATE DATABASE chaos');
  await server.end();
  const url = new URL(postgres.url);
  url.pathname = '/chaos';
  const databaseUrl = url.toString();

  // With --faults network, the last broker in a network namespace of its own, for the partitions.
  const unavailable = networkFaults ? await networkNamespacesUnavailable() : undefined;
  if (unavailable) throw new Error(`--faults network: ${unavailable}`);
  const isolated = networkFaults ? await isolatedHost() : undefined;
  if (isolated) cleanups.push(() => isolated.remove());
  const kinds = isolated ? [...FAULT_KINDS, ...NETWORK_FAULT_KINDS] : FAULT_KINDS;
  // With --faults network, every platform process reaches Postgres through a Toxiproxy proxy of its
  // own, for latency, resets and one api replica cut off; the run's own checks connect directly.
  const postgresLinks = networkFaults
    ? await startToxiproxy({ cacheDir: CACHE_DIR, upstream: () => `${url.hostname}:${url.port}`, seed, log })
    : undefined;
  if (postgresLinks) cleanups.push(() => postgresLinks.stop());
  // And each broker through a proxy of its own (one for every process: a broker advertises one address
  // per listener), which the broker advertises on a listener of the platform's; the brokers replicate,
  // and the run's own admin client asks, on their own listener.
  const kafkaListeners = new Map<string, string>();
  const kafkaLinks = networkFaults
    ? await startToxiproxy({
        cacheDir: CACHE_DIR,
        upstream: (name) => kafkaListeners.get(name)!,
        seed: seed + 1,
        log,
      })
    : undefined;
  if (kafkaLinks) cleanups.push(() => kafkaLinks.stop());
  const linkUrl = async (name: string): Promise<Record<string, string>> => {
    const through = new URL(databaseUrl);
    through.host = await postgresLinks!.addressFor(name);
    return { DATABASE_URL: through.toString() };
  };
  log(
    isolated
      ? `starting ${brokers} Kafka brokers, node ${brokers} in network namespace ${isolated.name}`
      : `starting ${brokers} Kafka brokers`,
  );
  const kafka = await startKafkaCluster({
    cacheDir: CACHE_DIR,
    logger,
    nodes: brokers,
    ...(isolated ? { placement: (id) => (id === brokers ? isolated.inside : isolated.outside) } : {}),
    ...(kafkaLinks
      ? {
          advertiseClientListener: (id, listener) => {
            kafkaListeners.set(`broker-${id}`, listener);
            return kafkaLinks.addressFor(`broker-${id}`);
          },
        }
      : {}),
    // A restarted broker takes its preferred leaderships back within seconds, not at Kafka's next
    // five-minute check: the coordination of consumer groups then moves between two live brokers
    // during the run as well, not only away from a killed one.
    settings: { 'leader.imbalance.check.interval.seconds': '1' },
  });
  cleanups.unshift(() => kafka.stop());
  // The platform's own logs (warnings and errors) for when a check fails: which process said what.
  await mkdir(join(CACHE_DIR, 'chaos'), { recursive: true });
  const logFile = join(CACHE_DIR, 'chaos', `seed-${seed}${networkFaults ? '-network' : ''}.log`);
  const output = createWriteStream(logFile);
  cleanups.push(() => new Promise((resolve) => output.end(resolve)));
  const platformBrokers = kafka.clientBrokers ?? kafka.brokers;
  log(
    `Kafka at ${kafka.brokers.join(',')}${kafka.clientBrokers ? `, the platform's proxies ${platformBrokers.join(',')}` : ''}; starting the platform (its logs: ${logFile})`,
  );
  const platform = await startPlatform({
    databaseUrl,
    kafkaBrokers: platformBrokers,
    replicas,
    output,
    ...(postgresLinks ? { envFor: linkUrl } : {}),
    env: {
      ...UNLIMITED_RATE,
      KAFKA_TOPIC_PREFIX: TOPIC_PREFIX,
      KAFKA_REPLICATION_FACTOR: String(Math.min(3, brokers)),
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      KAFKA_SESSION_TIMEOUT_MS: String(sessionTimeoutMs),
    },
  });
  cleanups.unshift(() => platform.stop());
  const names = () => platform.members.map((member) => `${member.name} (pid ${member.pid()})`).join(', ');
  log(`platform: ${names()}; api at ${platform.apiUrl}`);

  const integrator = await createIntegrator(platform, { name: 'Chaos' });
  const urls = { auth: platform.authUrl, api: platform.apiUrl };
  const client = new ChaosClient(urls, integrator);
  const hostileClient = new ChaosClient(urls, await createIntegrator(platform, { name: 'Chaos hostile' }));
  const receivers: WebhookReceiver[] = [];
  for (let i = 0; i < 2; i++) {
    let secret = '';
    const receiver = await startWebhookReceiver({ secrets: () => [secret] });
    cleanups.unshift(() => receiver.close());
    const created = await integrator.request<{ secret: string }>('POST', '/v2/webhooks', {
      body: { url: receiver.url, events: ['*'], description: `chaos receiver ${i + 1}` },
    });
    if (created.status !== 201) throw new Error(`creating a webhook: ${created.status} ${created.text}`);
    secret = created.body.results.secret;
    receivers.push(receiver);
  }

  // The run's own clients as the platform's (its lag samples read offsets every 500 ms).
  const kafkaClient = new Kafka(kafkaClientConfig(kafka.brokers, 'chaos'));
  const admin = kafkaClient.admin();
  await admin.connect();
  cleanups.unshift(() => admin.disconnect());
  const started = Date.now();
  // One pool for the lag samples and the checks: a sample every 500 ms reuses its connection.
  const pool = createPool({ connectionString: databaseUrl, applicationName: 'chaos-checks', max: 4 });
  cleanups.unshift(() => pool.end());
  // The durable groups and what each reads, from the services' own lists.
  const subscriptions = [
    { group: PROJECTOR_GROUP, streamTypes: PROJECTED_STREAM_TYPES },
    { group: INTAKE_GROUP, streamTypes: intakeStreamTypes() },
    ...PROCESS_MANAGER_SUBSCRIPTIONS,
  ];
  const sampler = new LagSampler(pool, kafkaClient, admin, TOPIC_PREFIX, subscriptions, started);
  cleanups.unshift(() => sampler.stop());
  const faults = scheduleFaults(
    random,
    durationMs,
    platform.members.map((member) => member.name),
    kafka.nodes.map((node) => node.id),
    sessionTimeoutMs,
    kinds,
    isolated && brokers,
  );
  log(
    `schedule: ${faults.map((f) => `${f.atMs / 1000}s ${f.kind} ${f.target} (${f.holdMs} ms${f.link ? ` ${JSON.stringify(f.link)}` : ''})`).join('; ')}`,
  );

  const tally = emptyTally();
  const hostile: HostileTally = { tally: emptyTally(), statuses: new Map(), unanswered: [] };
  const stopAt = started + durationMs;
  const until = () => Date.now() >= stopAt;
  const writing = Promise.all([
    ...Array.from({ length: writerCount - hostileCount }, (_, i) =>
      new Writer(client, tally, xoroshiro128plus(seed + i + 1)).run(until),
    ),
    ...Array.from({ length: hostileCount }, (_, i) =>
      new HostileWriter(hostileClient, hostile, (seed ^ (0x5eed * (i + 1))) | 0).run(until),
    ),
  ]);
  const targets = {
    processes: platform.members,
    brokers: kafka.nodes,
    ...(isolated ? { isolated } : {}),
    ...(postgresLinks ? { postgresLinks } : {}),
    ...(kafkaLinks ? { kafkaLinks } : {}),
    postgresLocation: postgres.location,
    postgresDown: () => postgres.down(),
  };
  const outcomes: FaultOutcome[] = [];
  for (const fault of faults) {
    await sleep(Math.max(0, started + fault.atMs - Date.now()));
    // Slow restarts push the schedule back: once the workload is over, no fault but the first of each kind.
    if (Date.now() >= stopAt && outcomes.length >= kinds.length) break;
    log(`fault: ${fault.kind} ${fault.target} for ${fault.holdMs} ms`);
    // When it did start: a fault whose target was slow to come back delays the next one.
    const outcome: FaultOutcome = { ...fault, atMs: Date.now() - started, maxLag: 0 };
    try {
      await carryOut(fault, targets);
      outcome.restoredMs = Date.now() - started;
      if (fault.kind === 'kill-replica') log(`platform: ${names()}`);
    } catch (error) {
      outcome.error = (error as Error).message;
      log(`fault ${fault.kind} ${fault.target} failed: ${outcome.error}`);
    }
    outcomes.push(outcome);
  }
  const progress = setInterval(
    () =>
      log(
        `writes: ${tally.acknowledged.length} acknowledged, ${tally.retries} attempts sent again; webhooks received: ${receivers.map((r) => r.received.length).join(', ')}`,
      ),
    10_000,
  );
  await writing;
  clearInterval(progress);
  log(
    `workload over: ${tally.acknowledged.length} writes acknowledged; waiting for the platform to be quiet`,
  );

  // Everything back up: a fault that failed to restore its target is reported, not left behind. A
  // process down now that no fault left down exited by itself (a crash): the exits check names it.
  const exits = platform.members
    .filter((member) => !member.running())
    .filter((member) => !outcomes.some((outcome) => outcome.error && outcome.target === member.name))
    .map((member) => member.describeExit());
  for (const member of platform.members) if (!member.running()) await member.restart();
  for (const node of kafka.nodes) if (!node.running()) await node.restart();
  const orgId = integrator.organizationId;
  const quietFrom = Date.now();
  let events: Awaited<ReturnType<typeof organizationEvents>>;
  for (;;) {
    events = await organizationEvents(pool, orgId);
    const lag = await sampler.lag();
    const { rows } = await pool.query<{ pending: number }>(
      `SELECT count(*)::int AS pending FROM webhooks.webhook_deliveries WHERE status <> 'succeeded'`,
    );
    const ids = new Set(events.map((event) => event.event_id));
    const undelivered = receivers.map(
      (receiver) => ids.size - new Set(receiver.received.filter((d) => ids.has(d.id)).map((d) => d.id)).size,
    );
    if (lag === 0 && rows[0]!.pending === 0 && undelivered.every((n) => n === 0)) break;
    if (Date.now() - quietFrom > QUIET_TIMEOUT_MS) {
      log(`not quiet after ${QUIET_TIMEOUT_MS / 1000} s; checking as it is`);
      break;
    }
    log(
      `waiting: lag ${lag ?? 'unknown'}, deliveries not succeeded ${rows[0]!.pending}, events not received ${undelivered.join(', ')}`,
    );
    await sleep(2_000);
  }
  const quietMs = Date.now() - quietFrom;
  await sampler.stop();
  for (const [index, outcome] of outcomes.entries()) {
    const seen = sampler.since(
      outcome.atMs,
      outcome.restoredMs ?? Infinity,
      outcomes[index + 1]?.atMs ?? Infinity,
    );
    outcome.maxLag = seen.maxLag;
    if (seen.zeroMs !== undefined) outcome.recoveredMs = seen.zeroMs;
  }

  const checks: Check[] = [
    checkWrites(tally, events),
    await checkPeople(client, tally),
    await checkInventory(client, tally),
    await checkReadModel(pool),
    checkWebhooks(receivers, events),
    checkHostile(hostile),
    ...(postgresLinks
      ? [
          checkCutAnswers(
            [tally, hostile.tally],
            outcomes
              .filter((outcome) => outcome.kind === 'cut-api-postgres')
              .map((outcome) => ({
                fromMs: started + outcome.atMs,
                untilMs: started + (outcome.restoredMs ?? outcome.atMs + outcome.holdMs),
              })),
          ),
        ]
      : []),
    // Last: the checks' own reads above may be answered 500 too.
    checkInternalErrors(tally, hostile),
    checkExits(exits),
  ];

  console.log('');
  console.log(`Faults (seed ${seed}):`);
  for (const outcome of outcomes) {
    const restored =
      outcome.restoredMs === undefined
        ? 'not restored'
        : `back after ${outcome.restoredMs - outcome.atMs} ms`;
    const recovered =
      outcome.recoveredMs === undefined
        ? 'lag not at 0 before the next fault'
        : `lag 0 ${outcome.recoveredMs - (outcome.restoredMs ?? outcome.atMs)} ms after`;
    console.log(
      `  ${(outcome.atMs / 1000).toFixed(0).padStart(4)} s  ${outcome.kind.padEnd(16)} ${outcome.target.padEnd(22)} ${restored}, ${recovered}, largest lag ${outcome.maxLag}${outcome.error ? `, FAILED: ${outcome.error}` : ''}`,
    );
  }
  console.log(
    `  largest lag of the run: ${sampler.largest()} events; quiet ${quietMs} ms after the workload`,
  );
  console.log('Checks:');
  for (const check of checks) {
    const bad = Object.values(check.failures).some((count) => count > 0);
    failed ||= bad;
    const counts = Object.entries({ ...check.failures, ...check.figures })
      .map(([name, count]) => `${name} ${count}`)
      .join(', ');
    console.log(`  ${bad ? 'FAIL' : 'ok  '} ${check.name}: ${counts}`);
    // A text (a process's exit and its last lines) line by line, so that its first line, which names
    // the process, stays short and readable where only part of the output is shown (CI's excerpt).
    if (bad)
      for (const example of check.examples)
        console.log(
          typeof example === 'string'
            ? example.replace(/^/gm, '       ')
            : `       ${JSON.stringify(example)}`,
        );
  }
  failed ||= outcomes.some((outcome) => outcome.error !== undefined);
  if (failed) {
    console.log(`The platform's most frequent warnings and errors (${logFile}):`);
    for (const line of await logSummary(logFile, LOG_SUMMARY_LINES)) console.log(`  ${line}`);
  }
  console.log(`chaos seed ${seed}: ${failed ? 'FAILED' : 'passed'}`);
} catch (error) {
  failed = true;
  console.error(`chaos seed ${seed}: could not run:`, error);
} finally {
  for (const cleanup of cleanups)
    await cleanup().catch((error: unknown) => logger.warn({ err: error }, 'cleanup failed'));
}
process.exit(failed ? 1 : 0);
