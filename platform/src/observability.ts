import { Counter, Gauge, type Registry } from 'prom-client';
import {
  BROKER_COUNTERS,
  type Bus,
  type BrokerCounter,
  type KafkaStatistics,
  type OutboxRelay,
} from '@ofp/bus';
import type { EventStore, ParkedEvents } from '@ofp/event-store';
import { sharedReading } from '@ofp/runtime';

/**
 * The process-wide metrics of the event flow (issue 15): how far behind each consumer group of this
 * process is (`bus_consumer_lag_events`, `bus_consumer_lag_seconds`), how many events each was handed
 * and handled (`bus_consumer_events_fetched_total`, `bus_consumer_events_handled_total`: a group that
 * reads its events again and again shows there, not in its lag), and how often a group's Kafka consumer
 * was given its partitions and how often the bus's watchdog started one again
 * (`bus_consumer_assignments_total`, `bus_consumer_restarts_total`), and which topics' partitions it
 * found stalled (`bus_consumer_stalled_partitions_total`). Read at scrape time; the two lag
 * gauges share one reading. A scrape whose lag reading failed or timed out (a broker cut off, say)
 * leaves both lag gauges out, where they kept their last value before: an old 0 told the autoscaler
 * and the lag alert that a group was caught up while nobody could tell. Prometheus marks the series
 * stale; `metrics_reading_failures_total{reading="bus_lag"}` (alert OfpMetricsUnreadable) says why.
 */
export function registerFlowMetrics(registry: Registry, bus: Bus): void {
  const lag = sharedReading(registry, 'bus_lag', () => bus.lag());
  new Gauge({
    name: 'bus_consumer_lag_events',
    help: 'Events of its stream types a consumer group has not handled yet',
    labelNames: ['group'],
    registers: [registry],
    async collect() {
      const groups = await lag();
      this.reset();
      for (const { group, events } of groups ?? []) this.set({ group }, events);
    },
  });
  new Gauge({
    name: 'bus_consumer_lag_seconds',
    help: 'How long the oldest event a consumer group has not handled has waited (Kafka: how long it has been behind without progress)',
    labelNames: ['group'],
    registers: [registry],
    async collect() {
      const groups = await lag();
      this.reset();
      for (const { group, seconds } of groups ?? []) this.set({ group }, seconds);
    },
  });
  for (const [name, field, help] of [
    [
      'bus_consumer_events_fetched_total',
      'fetched',
      'Events the bus handed to a consumer group of this process (again after a retry or a re-read)',
    ],
    [
      'bus_consumer_events_handled_total',
      'handled',
      'Events a consumer group of this process finished handling',
    ],
    [
      'bus_consumer_assignments_total',
      'assignments',
      'Times a Kafka consumer of the group in this process was given its partitions (joining, or a rebalance; none when a static member comes back within its session)',
    ],
    [
      'bus_consumer_restarts_total',
      'restarts',
      "Kafka consumers of the group in this process that the bus's watchdog found behind with nothing handed to their handler, and started again",
    ],
  ] as const) {
    new Counter({
      name,
      help,
      labelNames: ['group'],
      registers: [registry],
      collect() {
        this.reset();
        for (const counts of bus.throughput()) this.inc({ group: counts.group }, counts[field]);
      },
    });
  }
  new Counter({
    name: 'bus_consumer_stalled_partitions_total',
    help: "Partitions, per topic, that the bus's watchdog found behind with nothing handed (or committed) on them for the stall timeout, when it started a Kafka consumer of the group again",
    labelNames: ['group', 'topic'],
    registers: [registry],
    collect() {
      this.reset();
      for (const { group, stalled } of bus.throughput())
        for (const [topic, partitions] of Object.entries(stalled)) this.inc({ group, topic }, partitions);
    },
  });
}

/**
 * What the process's Kafka clients do on their connections, from librdkafka's statistics, per kind of
 * client (`client`: producer, consumer, admin) and broker (its node id, `bootstrap`, or a logical
 * broker such as `GroupCoordinator`): connects and disconnects (a reconnection storm, docs/kafka.md,
 * showed nowhere else; alert OfpKafkaReconnecting), requests timed out and sent again, the connections'
 * states and the requests waiting on them. Updated as the clients report (every `statistics.intervalMs`,
 * the admin clients' every second), not at the scrape.
 */
export function registerKafkaClientMetrics(registry: Registry, statistics: KafkaStatistics): void {
  const counters: Record<BrokerCounter, [name: string, help: string]> = {
    connects: [
      'kafka_client_connects_total',
      "Connections this process's Kafka clients attempted to the broker, successful or not",
    ],
    disconnects: [
      'kafka_client_disconnects_total',
      "Connections of this process's Kafka clients to the broker that closed or failed",
    ],
    requestTimeouts: [
      'kafka_client_request_timeouts_total',
      "Requests of this process's Kafka clients to the broker that went unanswered for the request timeout",
    ],
    requestRetries: [
      'kafka_client_request_retries_total',
      "Requests this process's Kafka clients sent to the broker again",
    ],
  };
  for (const counter of Object.keys(BROKER_COUNTERS) as BrokerCounter[]) {
    const [name, help] = counters[counter];
    new Counter({
      name,
      help,
      labelNames: ['client', 'broker'],
      registers: [registry],
      collect() {
        this.reset();
        for (const { role, broker, counts } of statistics.counts())
          this.inc({ client: role, broker }, counts[counter]);
      },
    });
  }
  new Gauge({
    name: 'kafka_client_connections',
    help: "This process's Kafka clients per state of their connection to the broker (librdkafka's: UP, DOWN, CONNECT, TRY_CONNECT, ...)",
    labelNames: ['client', 'broker', 'state'],
    registers: [registry],
    collect() {
      this.reset();
      for (const { role, broker, states } of statistics.connections())
        for (const [state, clients] of Object.entries(states))
          this.set({ client: role, broker, state }, clients);
    },
  });
  new Gauge({
    name: 'kafka_client_requests_waiting',
    help: "Requests of this process's Kafka clients to the broker waiting to be sent (queue=outbuf) or for their response (queue=waitresp)",
    labelNames: ['client', 'broker', 'queue'],
    registers: [registry],
    collect() {
      this.reset();
      for (const { role, broker, outbuf, waitresp } of statistics.connections()) {
        this.set({ client: role, broker, queue: 'outbuf' }, outbuf);
        this.set({ client: role, broker, queue: 'waitresp' }, waitresp);
      }
    },
  });
}

/**
 * What waits in the outbox, where the relay runs (`outbox_events`, `outbox_oldest_event_age_seconds`),
 * and the relay's failed batches by cause (`outbox_relay_failures_total`).
 */
export function registerOutboxMetrics(registry: Registry, outbox: EventStore, relay: OutboxRelay): void {
  const read = sharedReading(registry, 'outbox_backlog', () => outbox.outboxBacklog());
  new Gauge({
    name: 'outbox_events',
    help: 'Events in the outbox not yet published to Kafka',
    registers: [registry],
    async collect() {
      const backlog = await read();
      if (backlog) this.set(backlog.events);
    },
  });
  new Gauge({
    name: 'outbox_oldest_event_age_seconds',
    help: 'Age of the oldest event in the outbox not yet published to Kafka (0 when empty)',
    registers: [registry],
    async collect() {
      const backlog = await read();
      if (backlog) this.set(backlog.oldestSeconds);
    },
  });
  new Counter({
    name: 'outbox_relay_failures_total',
    help: 'Outbox batches the relay failed to publish and sends again, by cause (unconfirmed: a partition acknowledged without an offset)',
    labelNames: ['cause'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [cause, count] of Object.entries(relay.failures)) this.inc({ cause }, count);
    },
  });
}

/**
 * `ofp_parked_events`: the events each consumer group parked (API.md §12), not counting those waiting
 * behind them; read from the table at each scrape, so every process reports the deployment's figure.
 */
export function registerParkingMetrics(registry: Registry, parked: ParkedEvents): void {
  const read = sharedReading(registry, 'parked_events', () => parked.counts());
  new Gauge({
    name: 'ofp_parked_events',
    help: 'Events a consumer group could not apply and parked (GET /admin/parked_events lists them)',
    labelNames: ['group'],
    registers: [registry],
    async collect() {
      const counts = await read();
      if (!counts) return;
      this.reset();
      for (const [group, parkedEvents] of counts) this.set({ group }, parkedEvents);
    },
  });
}
