import { setTimeout as sleep } from 'node:timers/promises';
import { PARKED_CHANNEL, type EventStore, type ParkedEvents, type StoredEvent } from '@ofp/event-store';
import { isDependencyDown, type Logger, type Pool, type PostgresSession } from '@ofp/runtime';
import type { BatchHandler } from './bus.js';

export interface ParkingOptions {
  readonly parked: ParkedEvents;
  readonly store: EventStore;
  /** Asked whether the database answers before an event is parked: a database that does not is no reason. */
  readonly pool: Pool;
  /** Where the changes of other processes (parked, held, retries asked for) are heard. */
  readonly session: PostgresSession;
  readonly logger: Logger;
  /** Attempts at one event before it is parked (4 by default: 100, 200 and 400 ms apart). */
  readonly attempts?: number;
}

/** Longest reason kept: the first line or so of the error, not a payload. */
const REASON_CHARS = 1_000;
/** How often retries asked for are looked for besides the notifications (one missed is not lost). */
const RETRY_SWEEP_MS = 5_000;

const key = (group: string, streamId: string): string => `${group}\u0000${streamId}`;

/** What an operator reads of an error: its SQLSTATE when Postgres raised it, and its message. */
export function reasonOf(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  return (typeof code === 'string' ? `${code}: ${message}` : message).slice(0, REASON_CHARS);
}

/**
 * Parked events (API.md §12) for the durable consumer groups of a process: an event its handler
 * cannot apply after bounded retries with backoff is parked with its reason, the later events of its
 * stream wait behind it (one record's events stay in order), and the group goes on with every other
 * stream and organization. An operator's retry applies the parked event, then those behind it, in
 * order, in whichever process runs the group. A database that does not answer is no reason to park:
 * that failure goes back to the bus, which retries the batch.
 */
export class Parking {
  /** The streams held behind a parked event, per group (every group's, as the table says). */
  private held = new Set<string>();
  /** Streams this process parked while a read of the table was under way (which may predate them). */
  private readonly parkedDuringRefresh = new Set<Set<string>>();
  /** The handlers of this process's groups, for retries. */
  private readonly groups = new Map<string, BatchHandler>();
  private opening: Promise<void> | undefined;
  private unlisten: (() => Promise<void>) | undefined;
  private sweep: NodeJS.Timeout | undefined;
  /** Retries in this process run one after another. */
  private retrying: Promise<void> = Promise.resolve();
  private readonly attempts: number;

  constructor(private readonly options: ParkingOptions) {
    this.attempts = options.attempts ?? 4;
  }

  /** Reads which streams are held and listens for changes (once; every consumer module calls it). */
  open(): Promise<void> {
    this.opening ??= (async () => {
      this.unlisten = await this.options.session.listen(PARKED_CHANNEL, {
        notify: () => this.changed(),
        resumed: () => this.changed(),
      });
      await this.refresh();
      this.sweep = setInterval(() => this.takeUpRetries(), RETRY_SWEEP_MS);
      this.sweep.unref();
    })();
    return this.opening;
  }

  async close(): Promise<void> {
    clearInterval(this.sweep);
    await this.unlisten?.();
    await this.retrying;
  }

  /**
   * `handle` with parking: events of held streams wait behind their parked event; a batch that
   * fails is applied event by event, and an event that still fails after the attempts is parked.
   */
  guard(group: string, handle: BatchHandler): BatchHandler {
    this.groups.set(group, handle);
    return async (events) => {
      const free = await this.holdBehindParked(group, events);
      if (free.length === 0) return;
      try {
        await handle(free);
        return;
      } catch (error) {
        if (isDependencyDown(error)) throw error;
        this.options.logger.warn({ err: error, group }, 'a batch failed; applying its events one by one');
      }
      for (const event of free) {
        if ((await this.holdBehindParked(group, [event])).length === 0) continue;
        const failure = await this.attempt(handle, event);
        if (failure === undefined) continue;
        await this.park(group, event, failure);
      }
    };
  }

  /** The events of `events` whose stream is not held in `group`; the others are put behind it. */
  private async holdBehindParked(group: string, events: readonly StoredEvent[]): Promise<StoredEvent[]> {
    const free: StoredEvent[] = [];
    for (const event of events) {
      if (this.held.has(key(group, event.streamId)) && (await this.options.parked.hold(group, event)))
        continue;
      free.push(event);
    }
    return free;
  }

  /** Applies one event, with backoff between attempts: undefined once applied, else the last error. */
  private async attempt(handle: BatchHandler, event: StoredEvent): Promise<unknown> {
    let failure: unknown;
    for (let attempt = 0; attempt < this.attempts; attempt++) {
      if (attempt > 0) await sleep(100 * 2 ** (attempt - 1));
      try {
        await handle([event]);
        return undefined;
      } catch (error) {
        if (isDependencyDown(error)) throw error;
        failure = error;
      }
    }
    // Only an event the database could have taken is parked: when it does not answer, the bus retries.
    await this.options.pool.query('SELECT 1');
    return failure ?? new Error('failed');
  }

  private async park(group: string, event: StoredEvent, failure: unknown): Promise<void> {
    const reason = reasonOf(failure);
    await this.options.parked.park(group, event, reason, this.attempts);
    this.held.add(key(group, event.streamId));
    for (const added of this.parkedDuringRefresh) added.add(key(group, event.streamId));
    this.options.logger.error(
      {
        group,
        event: event.eventId,
        type: event.type,
        stream: event.streamId,
        version: event.version,
        reason,
      },
      'event parked: its stream waits behind it until it is retried (GET /admin/parked_events)',
    );
  }

  private changed(): void {
    void this.refresh().then(
      () => this.takeUpRetries(),
      (error: unknown) => this.options.logger.warn({ err: error }, 'could not read the parked events'),
    );
  }

  private async refresh(): Promise<void> {
    const added = new Set<string>();
    this.parkedDuringRefresh.add(added);
    try {
      const held = await this.options.parked.heldStreams();
      this.held = new Set([...held.map((stream) => key(stream.consumerGroup, stream.streamId)), ...added]);
    } finally {
      this.parkedDuringRefresh.delete(added);
    }
  }

  /** Applies again what operators asked to retry in this process's groups. */
  private takeUpRetries(): void {
    if (this.groups.size === 0) return;
    this.retrying = this.retrying.then(async () => {
      try {
        const streams = await this.options.parked.claimRetries([...this.groups.keys()]);
        for (const { consumerGroup, streamId } of streams) await this.applyHeld(consumerGroup, streamId);
        if (streams.length > 0) await this.refresh();
      } catch (error) {
        this.options.logger.warn({ err: error }, 'a retry of parked events failed; it is taken up again');
      }
    });
  }

  /** Applies a held stream's events in order, until it is free or one fails again (parked again). */
  private async applyHeld(group: string, streamId: string): Promise<void> {
    const handle = this.groups.get(group)!;
    let applied = 0;
    for (;;) {
      const first = await this.options.parked.first(group, streamId);
      if (!first) break;
      const [event] = await this.options.store.readEvents([first.eventId]);
      if (event) {
        const failure = await this.attempt(handle, event);
        if (failure !== undefined) {
          await this.options.parked.park(group, event, reasonOf(failure), this.attempts);
          this.options.logger.error(
            { group, event: event.eventId, stream: streamId, reason: reasonOf(failure) },
            'a retried parked event failed again; it stays parked',
          );
          return;
        }
      }
      await this.options.parked.release(group, streamId, first.id);
      applied++;
    }
    this.options.logger.info(
      { group, stream: streamId, applied },
      'parked events applied; the stream goes on',
    );
  }
}
