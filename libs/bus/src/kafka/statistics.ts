/**
 * librdkafka's statistics (`statistics.interval.ms`, STATISTICS.md in librdkafka's repository), kept per
 * kind of client and broker for the process's metrics: what each connection does, which no request's
 * outcome shows. A client that connects to a broker that is down again and again (the reconnection
 * storm of docs/kafka.md, 100 to 1,712 connects a second per process) shows in `connects` and nowhere
 * else.
 *
 * Each client (librdkafka handle) reports its own counters from its start; a process makes and closes
 * clients (a consumer started again by the watchdog, an admin client per try of `ensureTopics`), so
 * the counters here add what every client reported since its previous report, and stay monotonic. A
 * client's last interval before it closes is not reported, nor a client that lives less than one
 * interval: admin clients, which a process replaces after a failed request, report every
 * {@link ADMIN_STATISTICS_INTERVAL_MS}. Gauges (the connections' states, the requests waiting) are
 * those of the clients heard from within three of their intervals; a client quiet for {@link FORGET_AFTER_MS} is forgotten (one that
 * reported again after that, say after the event loop was held that long, would be counted anew).
 */

/** The three kinds of client the KafkaJS-compatible API makes (an admin client is a producer to librdkafka). */
export type KafkaClientRole = 'producer' | 'consumer' | 'admin';

/** The counters per broker, from librdkafka's `brokers.<name>` object. */
export const BROKER_COUNTERS = {
  /** Connection attempts, successful or not (name resolution failures included). */
  connects: 'connects',
  /** Connections closed: by the broker, by the client, failed, or failed while being set up. */
  disconnects: 'disconnects',
  /** Requests that timed out (`socket.timeout.ms`, the platform's REQUEST_TIMEOUT_MS). */
  requestTimeouts: 'req_timeouts',
  /** Requests sent again. */
  requestRetries: 'txretries',
} as const satisfies Record<string, CounterField>;
export type BrokerCounter = keyof typeof BROKER_COUNTERS;

/** A broker as the metrics name it: its node id, `bootstrap` for an address of the bootstrap list, or a logical broker's name (`GroupCoordinator`). */
export type BrokerLabel = string;

export interface BrokerCounts {
  readonly role: KafkaClientRole;
  readonly broker: BrokerLabel;
  readonly counts: Readonly<Record<BrokerCounter, number>>;
}

export interface BrokerConnections {
  readonly role: KafkaClientRole;
  readonly broker: BrokerLabel;
  /** librdkafka's state of the connection (`UP`, `DOWN`, `CONNECT`, `TRY_CONNECT`, `INIT`, ...): the number of clients in each. */
  readonly states: Readonly<Record<string, number>>;
  /** Requests waiting to be sent (`outbuf_cnt`), summed over the clients. */
  readonly outbuf: number;
  /** Requests sent and waiting for their response (`waitresp_cnt`), summed over the clients. */
  readonly waitresp: number;
}

type CounterField = 'connects' | 'disconnects' | 'req_timeouts' | 'txretries';

interface BrokerReport {
  name: string;
  nodeid: number;
  source: string;
  state: string;
  outbuf_cnt: number;
  waitresp_cnt: number;
  connects: number;
  disconnects: number;
  req_timeouts: number;
  txretries: number;
}

interface ClientReport {
  /** The handle's name, unique in the process (`<client.id>#producer-3`). */
  name: string;
  brokers?: Record<string, BrokerReport>;
}

interface ClientState {
  role: KafkaClientRole;
  heardAt: number;
  /** Its last report per broker entry (librdkafka's key: `host:port/<node id>`, `.../bootstrap`, `GroupCoordinator`). */
  brokers: Map<string, BrokerReport>;
}

const FORGET_AFTER_MS = 30 * 60_000;

/** How often librdkafka reports by default here: well within a Prometheus scrape interval's reach, and cheap (one JSON document per client). */
export const STATISTICS_INTERVAL_MS = 10_000;

/**
 * How often admin clients report, at most. A process replaces its admin client after a failed request
 * (the lag readings' and the watchdog's, and the broker check's, which runs every second: while Kafka
 * does not answer, a new client every few seconds), and `ensureTopics` makes one per try: every
 * 10 s, such a client was gone before its first report, and its connects, in the very outage the
 * counters are for, were never counted. An admin client's report is small (it holds no partitions;
 * docs/kafka.md has the cost).
 */
export const ADMIN_STATISTICS_INTERVAL_MS = 1_000;

export class KafkaStatistics {
  private readonly clients = new Map<string, ClientState>();
  private readonly totals = new Map<string, BrokerCounts>();

  constructor(
    readonly intervalMs = STATISTICS_INTERVAL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** librdkafka's settings that make a client of `role` report here. */
  clientConfig(role: KafkaClientRole): {
    'statistics.interval.ms': number;
    stats_cb: (event: { message: string }) => void;
  } {
    return {
      'statistics.interval.ms': this.reportingInterval(role),
      stats_cb: (event) => this.record(role, event.message),
    };
  }

  /** One report of one client: librdkafka's statistics JSON. */
  record(role: KafkaClientRole, json: string): void {
    const report = JSON.parse(json) as ClientReport;
    this.forget(this.now() - FORGET_AFTER_MS);
    const client = this.clients.get(report.name) ?? {
      role,
      heardAt: 0,
      brokers: new Map<string, BrokerReport>(),
    };
    this.clients.set(report.name, client);
    client.heardAt = this.now();
    for (const [key, broker] of Object.entries(report.brokers ?? {})) {
      // The internal broker (`:0/internal`) holds partitions without a leader; it never connects.
      if (broker.source === 'internal') continue;
      const before = client.brokers.get(key);
      client.brokers.set(key, broker);
      const label = brokerLabel(broker);
      const id = `${role}\u0000${label}`;
      const total = this.totals.get(id) ?? { role, broker: label, counts: zeroCounts() };
      const counts = { ...total.counts };
      for (const [counter, field] of Object.entries(BROKER_COUNTERS) as [BrokerCounter, CounterField][])
        counts[counter] += Math.max(0, broker[field] - (before?.[field] ?? 0));
      this.totals.set(id, { role, broker: label, counts });
    }
  }

  /** What every client of each role reported of each broker since the process started. */
  counts(): readonly BrokerCounts[] {
    return [...this.totals.values()];
  }

  /** How often a client of `role` reports. */
  reportingInterval(role: KafkaClientRole): number {
    return role === 'admin' ? Math.min(this.intervalMs, ADMIN_STATISTICS_INTERVAL_MS) : this.intervalMs;
  }

  /** The connections of the clients heard from within three of their intervals (the others closed), per role and broker. */
  connections(): readonly BrokerConnections[] {
    const byBroker = new Map<
      string,
      {
        role: KafkaClientRole;
        broker: BrokerLabel;
        states: Record<string, number>;
        outbuf: number;
        waitresp: number;
      }
    >();
    for (const client of this.clients.values()) {
      if (client.heardAt < this.now() - 3 * this.reportingInterval(client.role)) continue;
      for (const broker of client.brokers.values()) {
        const label = brokerLabel(broker);
        const id = `${client.role}\u0000${label}`;
        const entry = byBroker.get(id) ?? {
          role: client.role,
          broker: label,
          states: {},
          outbuf: 0,
          waitresp: 0,
        };
        byBroker.set(id, entry);
        entry.states[broker.state] = (entry.states[broker.state] ?? 0) + 1;
        entry.outbuf += broker.outbuf_cnt;
        entry.waitresp += broker.waitresp_cnt;
      }
    }
    return [...byBroker.values()];
  }

  private forget(quietSince: number): void {
    for (const [name, client] of this.clients) if (client.heardAt < quietSince) this.clients.delete(name);
  }
}

function brokerLabel(broker: BrokerReport): BrokerLabel {
  if (broker.source === 'logical') return broker.name;
  return broker.nodeid >= 0 ? String(broker.nodeid) : 'bootstrap';
}

function zeroCounts(): Record<BrokerCounter, number> {
  return { connects: 0, disconnects: 0, requestTimeouts: 0, requestRetries: 0 };
}
