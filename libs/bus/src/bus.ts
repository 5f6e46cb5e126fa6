import type { StoredEvent } from '@ofp/event-store';

/**
 * Handles a batch of events of one consumer group. Resolving means every event of the batch is
 * done; throwing means none is taken as done, and the batch (or a part of it) comes again.
 * Delivery is at least once: handlers deduplicate (by event id or stream version).
 */
export type BatchHandler = (events: readonly StoredEvent[]) => Promise<void>;

export interface SubscribeOptions {
  /** Consumers of one group share the work and its progress. */
  readonly group: string;
  /** Stream types (`people`, `orders`...) to receive. */
  readonly streamTypes: readonly string[];
  readonly handle: BatchHandler;
  /**
   * Every process reads every event, from the beginning, and no progress is kept (for state each
   * process holds in memory, such as the revocation deny-list). `group` then names the subscription
   * only in logs and metrics.
   */
  readonly transient?: boolean;
}

export interface Subscription {
  /** Stops fetching, waits for the batch in hand, and releases the connection. */
  stop(): Promise<void>;
}

/** How far a consumer group is behind what it will read. */
export interface ConsumerLag {
  readonly group: string;
  /** Events of its stream types not yet handled. */
  readonly events: number;
  /**
   * How long the oldest of them has waited (the Postgres-log bus: since it was recorded), or, where
   * only offsets are known (Kafka), how long the group has been behind without handling anything;
   * 0 when caught up.
   */
  readonly seconds: number;
}

/**
 * How many events a consumer group of this process was handed by the bus (`fetched`) and how many its
 * handler finished (`handled`), since the process started. In a healthy group the two grow together:
 * fetched far ahead of handled means events are read again and again (a failing handler retried, or a
 * consumer whose position does not move), which the lag, counted from committed offsets, does not show.
 */
export interface ConsumerThroughput {
  readonly group: string;
  readonly fetched: number;
  readonly handled: number;
  /**
   * Kafka: how many times a consumer of the group in this process was given its partitions (joining,
   * or a rebalance). A static member that comes back within its session gets them without one.
   */
  readonly assignments: number;
  /** Kafka: consumers of the group that the bus's watchdog found stalled while behind, and started again. */
  readonly restarts: number;
  /**
   * Kafka: per topic, the partitions the watchdog found stalled when it started a consumer of the
   * group again (behind, with nothing handed or committed on them for the stall timeout).
   */
  readonly stalled: Readonly<Record<string, number>>;
}

type Counts = { -readonly [K in keyof Omit<ConsumerThroughput, 'group' | 'stalled'>]: number } & {
  stalled: Record<string, number>;
};

/** The counters behind {@link Bus.throughput}, kept per group by each bus. */
export class ThroughputCounter {
  private readonly groups = new Map<string, Counts>();

  private of(group: string): Counts {
    let counts = this.groups.get(group);
    if (!counts)
      this.groups.set(group, (counts = { fetched: 0, handled: 0, assignments: 0, restarts: 0, stalled: {} }));
    return counts;
  }

  fetched(group: string, events: number): void {
    this.of(group).fetched += events;
  }

  handled(group: string, events: number): void {
    this.of(group).handled += events;
  }

  assigned(group: string): void {
    this.of(group).assignments++;
  }

  restarted(group: string): void {
    this.of(group).restarts++;
  }

  stalled(group: string, topic: string): void {
    const { stalled } = this.of(group);
    stalled[topic] = (stalled[topic] ?? 0) + 1;
  }

  read(): ConsumerThroughput[] {
    return [...this.groups].map(([group, counts]) => ({ group, ...counts, stalled: { ...counts.stalled } }));
  }
}

/** How events travel from the event store to the services that react to them. */
export interface Bus {
  /** What carries the events, as OpenTelemetry's `messaging.system` names it (`kafka`), or this project's name. */
  readonly system: string;
  subscribe(options: SubscribeOptions): Promise<Subscription>;
  /** The lag of every durable consumer group this process subscribed (transient ones keep no progress). */
  lag(): Promise<ConsumerLag[]>;
  /** Events fetched and handled per consumer group of this process, transient ones included. */
  throughput(): readonly ConsumerThroughput[];
  /** Releases what the bus itself holds (subscriptions are stopped by their owners). */
  close(): Promise<void>;
}

/** Backoff between retries of a failing batch: 100 ms doubling up to 10 s. */
export function retryDelay(failures: number): number {
  return Math.min(10_000, 100 * 2 ** Math.min(failures, 7));
}
