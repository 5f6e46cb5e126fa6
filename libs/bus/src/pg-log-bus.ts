import {
  EVENTS_CHANNEL,
  START,
  type EventPage,
  type EventStore,
  type GlobalPosition,
} from '@ofp/event-store';
import { prepared, type Logger, type Pool, type PostgresSession, type SessionLock } from '@ofp/runtime';
import { Wakeup } from './wakeup.js';
import {
  ThroughputCounter,
  retryDelay,
  type Bus,
  type ConsumerLag,
  type ConsumerThroughput,
  type SubscribeOptions,
  type Subscription,
} from './bus.js';

/** Lag is counted up to this many events: past it, the figure says "at least". */
const LAG_COUNT_LIMIT = 1_000_000;
/**
 * How often a group's checkpoint is written while it moves: at most once a second, not after every
 * batch (a consumer that stops or dies hands the events of that second again, which handlers
 * deduplicate; one that stops in order writes where it is).
 */
const CHECKPOINT_INTERVAL_MS = 1_000;
/**
 * After a read that found an event held back, the next read waits for a notification, or this long:
 * an event committed behind an older transaction still in flight was invisible to the read, and its
 * notification came before it (the old transaction's end raises none when it appended nothing). A
 * read that found none held back waits for the next notification (or the poll): every event it did
 * not see commits after it, and notifies then.
 */
const SECOND_LOOK_MS = 25;

export interface PgLogBusOptions {
  /** Events per batch handed to a handler. */
  readonly batchSize: number;
  /**
   * How often to look again without a notification. Needed because an event may be held back
   * behind an older transaction that is still in flight and commits without appending.
   */
  readonly pollIntervalMs: number;
}

/**
 * The standalone bus: consumers read the event store in global order, each group keeping its
 * checkpoint in `es.checkpoints`, woken by the NOTIFY that every append raises (through the process's
 * {@link PostgresSession}, which listens again after any connection loss and wakes them then).
 * A consumer reads its next page while it handles a batch when that page holds events already (the
 * batch's page was full, or an append was announced since it was read): the projector's batch is three
 * round trips, and a write's read-your-writes wait no longer adds the next read's after them.
 */
export class PgLogBus implements Bus {
  /** Not one of OpenTelemetry's messaging systems: the event store read as a log. */
  readonly system = 'ofp.postgres_log';
  private readonly durable = new Map<string, PgLogConsumer>();
  private readonly counts = new ThroughputCounter();

  constructor(
    private readonly pool: Pool,
    private readonly session: PostgresSession,
    private readonly store: EventStore,
    private readonly logger: Logger,
    private readonly options: PgLogBusOptions = { batchSize: 500, pollIntervalMs: 1000 },
  ) {}

  async subscribe(options: SubscribeOptions): Promise<Subscription> {
    const consumer = new PgLogConsumer(
      this.pool,
      this.session,
      this.store,
      this.logger.child({ group: options.group }),
      this.options,
      options,
      this.counts,
    );
    await consumer.start();
    if (!options.transient) this.durable.set(options.group, consumer);
    return {
      stop: async () => {
        this.durable.delete(options.group);
        await consumer.stop();
      },
    };
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  throughput(): readonly ConsumerThroughput[] {
    return this.counts.read();
  }

  /**
   * Events of the group's types after its position (where this process's consumer is, when it leads
   * the group; else its stored checkpoint), and how long ago the first was recorded.
   */
  async lag(): Promise<ConsumerLag[]> {
    return Promise.all(
      [...this.durable].map(async ([group, consumer]) => {
        const position = consumer.position();
        const { rows } = await this.pool.query<{ events: number; seconds: number | null }>(
          `SELECT count(*)::int AS events,
                  extract(epoch FROM clock_timestamp() - min(recorded_at))::float8 AS seconds
             FROM (SELECT e.recorded_at
                     FROM es.events e
                     LEFT JOIN es.checkpoints c ON c.consumer_group = $1
                    WHERE (e.transaction_id, e.position) >
                          (coalesce($3::xid8, c.transaction_id, '0'::xid8), coalesce($4::bigint, c.position, 0))
                      AND e.stream_type = ANY($2::text[])
                    LIMIT ${LAG_COUNT_LIMIT}) AS behind`,
          [group, consumer.streamTypes, position?.transactionId ?? null, position?.position ?? null],
        );
        const row = rows[0];
        return { group, events: row?.events ?? 0, seconds: Math.max(0, row?.seconds ?? 0) };
      }),
    );
  }
}

class PgLogConsumer implements Subscription {
  private running = true;
  /** Where the consumer is, while it leads its group. */
  private current: GlobalPosition | undefined;
  private readonly wakeup = new Wakeup();
  private loop: Promise<void> | undefined;
  private unlisten: (() => Promise<void>) | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly session: PostgresSession,
    private readonly store: EventStore,
    private readonly logger: Logger,
    private readonly options: PgLogBusOptions,
    private readonly subscription: SubscribeOptions,
    private readonly counts: ThroughputCounter,
  ) {}

  async start(): Promise<void> {
    const wake = (): void => this.wakeup.notify();
    // An append's notification names its stream type: one of types this group does not read leaves it
    // asleep (its poll moves it past such events); an empty payload (an older appender) wakes it.
    const types = new Set(this.subscription.streamTypes);
    const appended = (streamType: string): void => {
      if (streamType === '' || types.has(streamType)) wake();
    };
    this.unlisten = await this.session.listen(EVENTS_CHANNEL, { notify: appended, resumed: wake });
    this.loop = this.run();
  }

  get streamTypes(): readonly string[] {
    return this.subscription.streamTypes;
  }

  /** The position after the last batch handled, while this consumer leads its group. */
  position(): GlobalPosition | undefined {
    return this.current;
  }

  async stop(): Promise<void> {
    this.running = false;
    this.wakeup.notify();
    await this.loop;
    await this.unlisten?.();
  }

  /**
   * One active consumer per group, the holder of the group's lock on its session; another process of
   * the same group waits as a standby, and takes over once that session is lost. A consumer that lost
   * the lock stops at once (what it has in hand may be handled twice: handlers deduplicate) and
   * starts again from the checkpoint once it holds it again.
   */
  private async run(): Promise<void> {
    const transient = this.subscription.transient === true;
    const leadership = transient ? undefined : this.session.lock(`bus:${this.subscription.group}`);
    let checkpoint: GlobalPosition | undefined = transient ? START : undefined;
    /** The checkpoint as stored, and when this consumer stored or read it. */
    let stored: GlobalPosition | undefined;
    let storedAt = 0;
    let failures = 0;
    /** The next page, read while the batch before it was handled, and where it starts. */
    let ahead: { after: GlobalPosition; page: Promise<EventPage> } | undefined;
    const store = async (): Promise<void> => {
      if (!leadership || checkpoint === undefined || checkpoint === stored) return;
      await this.writeCheckpoint(checkpoint, leadership);
      stored = checkpoint;
      storedAt = performance.now();
    };
    /** How long to wait at most, for `ms` or until the moved checkpoint is due to be stored. */
    const upTo = (ms: number): number =>
      leadership && checkpoint !== stored
        ? Math.max(0, Math.min(ms, storedAt + CHECKPOINT_INTERVAL_MS - performance.now()))
        : ms;
    while (this.running) {
      try {
        if (leadership && !leadership.held()) {
          if (checkpoint !== undefined)
            this.logger.warn('consumer group lock lost; standing by until it is ours again');
          checkpoint = this.current = undefined;
          if (!(await leadership.acquire())) {
            await this.wakeup.wait(this.options.pollIntervalMs);
            continue;
          }
        }
        if (checkpoint === undefined) {
          checkpoint = stored = await this.readCheckpoint();
          storedAt = performance.now();
        }
        if (performance.now() - storedAt >= CHECKPOINT_INTERVAL_MS) await store();
        // The page read ahead follows this position only when the batch before it was handled.
        const read = ahead?.after === checkpoint ? ahead.page : this.read(checkpoint);
        ahead = undefined;
        const { events, through, full, heldBack } = await read;
        if (events.length > 0) {
          this.counts.fetched(this.subscription.group, events.length);
          // When the next page holds events already (this one was full, or an append was announced
          // since this read began), it is read while this batch is handled, not after.
          if (through !== undefined && (full || this.wakeup.take())) {
            const page = this.read(through);
            // Awaited by the next turn, or dropped (a failed batch reads again from its checkpoint).
            page.catch(() => undefined);
            ahead = { after: through, page };
          }
          await this.subscription.handle(events);
          this.counts.handled(this.subscription.group, events.length);
        }
        if (through !== undefined) {
          // Past the events of other types too: they are never read again.
          checkpoint = through;
          if (leadership) this.current = checkpoint;
        }
        failures = 0;
        if (!full && ahead === undefined) {
          // Until an append is announced or the wait is over; a checkpoint falling due meanwhile is
          // stored without reading the log again.
          const until = performance.now() + (heldBack ? SECOND_LOOK_MS : this.options.pollIntervalMs);
          while (!(await this.wakeup.wait(upTo(until - performance.now()))) && performance.now() < until)
            await store();
        }
      } catch (error) {
        ahead = undefined;
        failures++;
        this.logger.error(
          { err: error, failures },
          'event handler failed; retrying from the last checkpoint',
        );
        await this.wakeup.wait(retryDelay(failures));
      }
    }
    // Stopping in order: the next leader starts where this one is.
    await store().catch((error: unknown) =>
      this.logger.warn({ err: error }, 'could not store the checkpoint while stopping'),
    );
    this.current = undefined;
    await leadership?.release();
  }

  private read(after: GlobalPosition): Promise<EventPage> {
    return this.store.readAll(after, {
      limit: this.options.batchSize,
      streamTypes: this.subscription.streamTypes,
    });
  }

  private async readCheckpoint(): Promise<GlobalPosition> {
    const { rows } = await this.pool.query<{ transaction_id: string; position: number }>(
      'SELECT transaction_id::text AS transaction_id, position FROM es.checkpoints WHERE consumer_group = $1',
      [this.subscription.group],
    );
    const row = rows[0];
    return row ? { transactionId: row.transaction_id, position: row.position } : START;
  }

  /**
   * Moves the group's checkpoint forward, never back: a consumer that lost its lock while handling a
   * batch (its session gone, another process leading meanwhile) must not undo the new leader's progress.
   */
  private async writeCheckpoint(position: GlobalPosition, leadership: SessionLock): Promise<void> {
    if (!leadership.held()) return;
    await this.pool.query(
      prepared(
        `INSERT INTO es.checkpoints (consumer_group, transaction_id, position) VALUES ($1, $2::xid8, $3)
       ON CONFLICT (consumer_group) DO UPDATE SET transaction_id = EXCLUDED.transaction_id, position = EXCLUDED.position, updated_at = now()
       WHERE (es.checkpoints.transaction_id, es.checkpoints.position) < (EXCLUDED.transaction_id, EXCLUDED.position)`,
        [this.subscription.group, position.transactionId, position.position],
      ),
    );
  }
}
