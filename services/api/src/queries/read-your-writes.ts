import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { baseError, type RecordChange } from '@ofp/contracts';
import type { EventStore, GlobalPosition } from '@ofp/event-store';
import { PROJECTION_CHANNEL, notifiedProgress, projectedVersions } from '@ofp/models';
import {
  currentDatabaseDeadline,
  prepared,
  withDatabaseDeadline,
  type Logger,
  type Pool,
  type PostgresSession,
} from '@ofp/runtime';
import { HANDLED_CHANNEL, handledKey, handledVersions } from '../process-managers/handled-events.js';
import type { ProcessManager } from '../process-managers/process-manager.js';

/** One stream a write appended to: how far, and the changes it appended (what it derives from them). */
export interface WrittenStream {
  readonly streamId: string;
  readonly streamType: string;
  readonly orgId: number;
  readonly version: number;
  readonly position: GlobalPosition;
  readonly changes: readonly RecordChange[];
}

/** What a wait needs of a written stream (a stream kept in {@link UNSETTLED_WRITES} has no position). */
type Settling = Omit<WrittenStream, 'position'>;

/**
 * Longest the record of a write answered before the read model showed it may take: on a link to
 * Postgres that hung, the write still answers soon after its wait (logged as not recorded).
 */
const RECORD_BOUND_MS = 1_000;

/** How often the records that could not be made when their write answered are tried again. */
const RECORD_RETRY_MS = 500;

/**
 * How often recorded writes are forgotten once the read model shows them, without a read: reads forget
 * their organization's, but an organization that does not read again would keep its rows for good,
 * and its next read (days later, say) would wait for all of them at once.
 */
const SWEEP_INTERVAL_MS = 10_000;
/** The organizations one sweep looks at, those with the oldest rows first. */
const SWEEP_ORGS = 20;
/** How long a sweep waits for one organization's recorded writes to show. */
const SWEEP_WAIT_MS = 1_000;

/** Writes answered before the read model showed them, by organization (migration 004). */
const UNSETTLED_WRITES = 'api.unsettled_writes';

/**
 * A boolean SQL expression: the organization whose id is the parameter `orgParameter` (`$3`) has a
 * write answered before the read model showed it. A read puts it in its own statement
 * ({@link ReadYourWrites.catchUp}), so that it costs no round trip while the read model keeps up.
 */
export function unsettledFor(orgParameter: string): string {
  return `EXISTS (SELECT FROM ${UNSETTLED_WRITES} WHERE org_id = ${orgParameter})`;
}

/** What a pending wait waits for: the projector to reach a stream version, or a manager to handle it. */
type Awaited =
  | { readonly kind: 'projected'; readonly streamId: string; readonly version: number }
  | {
      readonly kind: 'handled';
      readonly manager: string;
      readonly streamId: string;
      readonly version: number;
    };

interface Waiter {
  readonly awaited: Awaited;
  readonly resolve: (reached: boolean) => void;
  readonly timer: NodeJS.Timeout;
}

/**
 * Read-your-writes (API.md §5): a write's response waits until the read model shows the write and
 * everything it derives. For each stream written, the projector must have applied its version; each
 * process manager that reacts to its stream type must have handled it (`api.handled_streams`,
 * written with the follow-on changes), and then the projector must have applied the streams the
 * manager appended to (an inventory record, the order of a fulfillment order) at their versions
 * since. Waits are kept in Postgres terms only, so it holds wherever the managers and the projector
 * run (this process, or other processes of the distributed shape).
 *
 * All pending waits are checked together, with one query per kind, whenever a manager announces
 * progress (LISTEN, through the process's session, which also tells when it listens again after a lost
 * connection), and at a short interval in case a notification was missed. The projector's
 * announcement names the streams its batch applied, and releases their waits without a query (one
 * that names none, a rebuild's, has them all checked).
 * A new wait is checked at once only when progress was announced since its write began (see
 * {@link ReadYourWrites.mark}).
 *
 * The whole wait of one write is bounded by `timeoutMs`. Past it the response still goes out (the
 * write is durable: a 503 would have a client without an Idempotency-Key apply it twice), but first
 * what it wrote is recorded in {@link UNSETTLED_WRITES}, in Postgres so that every api process sees
 * it: until the read model shows it, the organization's reads wait ({@link catchUp}), at most
 * `readTimeoutMs`, and then answer 503 with Retry-After rather than show the state before the write.
 */
export class ReadYourWrites {
  private readonly waiters = new Set<Waiter>();
  private unlisten: (() => Promise<void>)[] = [];
  private checking = false;
  /** How many announcements of progress (and resumed sessions) this process has heard. */
  private announced = 0;
  private recheck = false;
  private poller: NodeJS.Timeout | undefined;
  /**
   * Writes answered past their wait whose record in {@link UNSETTLED_WRITES} failed (the database
   * was down or hung), each with what it wrote: tried again every {@link RECORD_RETRY_MS} until
   * recorded, so that their organization's reads do not go back to the state before them once the
   * database answers again.
   */
  private unrecorded: Settling[][] = [];
  private recorder: NodeJS.Timeout | undefined;
  private recording = false;
  private sweeper: NodeJS.Timeout | undefined;
  private sweeping = false;
  private readonly waits: Histogram<'outcome'> | undefined;
  private readonly readsHeld: Counter<'outcome'> | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly store: EventStore,
    private readonly managers: readonly ProcessManager[],
    private readonly session: PostgresSession,
    private readonly logger: Logger,
    private readonly options: { timeoutMs: number; readTimeoutMs: number; pollIntervalMs: number },
    metrics?: Registry,
  ) {
    this.waits =
      metrics &&
      new Histogram({
        name: 'read_your_writes_wait_seconds',
        help: "How long a write's response waited for the read model and what the write derives, by outcome (caught_up, timed_out)",
        labelNames: ['outcome'],
        buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
        registers: [metrics],
      });
    this.readsHeld =
      metrics &&
      new Counter({
        name: 'read_your_writes_held_reads_total',
        help: "Reads that found their organization's writes answered before the read model showed them, by outcome (caught_up: then answered; unavailable: 503)",
        labelNames: ['outcome'],
        registers: [metrics],
      });
    // Every outcome exists from the start: the timeouts alert's rate() sees the first one.
    for (const outcome of ['caught_up', 'timed_out']) this.waits?.zero({ outcome });
    for (const outcome of ['caught_up', 'unavailable']) this.readsHeld?.inc({ outcome }, 0);
    if (metrics) {
      const unrecorded = (): number => this.unrecorded.length;
      new Gauge({
        name: 'read_your_writes_unrecorded_writes',
        help: "Writes answered before the read model showed them whose record for their organization's reads failed, waiting to be recorded again (alert OfpReadYourWritesUnrecorded)",
        registers: [metrics],
        collect() {
          this.set(unrecorded());
        },
      });
    }
  }

  async start(): Promise<void> {
    const announce = (): void => {
      this.announced++;
      void this.check();
    };
    const progressed = { notify: announce, resumed: announce };
    // A batch's notification names the streams it applied: their waiters are released without a look
    // at the checkpoints, and no other projected stream moved with it.
    const projected = {
      notify: (payload: string): void => {
        const streams = notifiedProgress(payload);
        if (streams === undefined) return announce();
        this.announced++;
        for (const waiter of this.waiters) {
          const { awaited } = waiter;
          if (awaited.kind === 'projected' && (streams.get(awaited.streamId) ?? 0) >= awaited.version)
            this.release(waiter, true);
        }
      },
      resumed: announce,
    };
    this.unlisten = await Promise.all([
      this.session.listen(PROJECTION_CHANNEL, projected),
      this.session.listen(HANDLED_CHANNEL, progressed),
    ]);
    this.poller = setInterval(() => void this.check(), this.options.pollIntervalMs);
    this.recorder = setInterval(() => void this.recordAgain(), RECORD_RETRY_MS);
    this.sweeper = setInterval(() => void this.sweep(), SWEEP_INTERVAL_MS);
  }

  async stop(): Promise<void> {
    clearInterval(this.poller);
    clearInterval(this.recorder);
    clearInterval(this.sweeper);
    await this.recordAgain();
    if (this.unrecorded.length > 0)
      this.logger.error(
        { streams: this.unrecorded.flat().map(({ streamId, version }) => ({ streamId, version })) },
        "stopping with writes answered before the read model showed them and never recorded: their organization's reads may show the state before them until the read model catches up",
      );
    for (const waiter of this.waiters) this.release(waiter, false);
    await Promise.all(this.unlisten.map((unlisten) => unlisten()));
  }

  /**
   * A mark of the progress heard so far, taken before a write appends. The projector and the managers
   * announce what they applied after it commits, so while no announcement has been heard since the
   * mark, the write cannot show yet: its wait needs no look until the next one (a person write's first
   * look found nothing in nearly every case, one statement per write).
   */
  mark(): number {
    return this.announced;
  }

  /**
   * Resolves true once the read model shows `written` and what it derives, false when that took
   * longer than the timeout: the writes are then recorded as unsettled (logged), and the response
   * goes out without the wait. `since`: the {@link mark} taken before the write appended.
   */
  async settle(written: readonly WrittenStream[], since?: number): Promise<boolean> {
    const begun = performance.now();
    const deadline = Date.now() + this.options.timeoutMs;
    // The write is durable by now: its own wait bounds this, not the request's database deadline, and
    // a database that fails meanwhile makes it answer without the wait rather than fail. The wait's
    // deadline bounds its statements too (what a manager appends to, those streams' versions): under
    // the pool's own bound (statement_timeout and 2 s) a link to Postgres that hung held the answer
    // 32 s (the chaos run's api cut from Postgres).
    const caughtUp = await withDatabaseDeadline(deadline, () => this.reached(written, deadline, { since }));
    if (!caughtUp)
      await withDatabaseDeadline(Date.now() + RECORD_BOUND_MS, () => this.recordUnsettled(written));
    this.waits?.observe(
      { outcome: caughtUp ? 'caught_up' : 'timed_out' },
      (performance.now() - begun) / 1000,
    );
    return caughtUp;
  }

  /**
   * Returns once the read model shows every write of `orgId` answered before it did (each recorded
   * by {@link settle}), forgetting them; throws a 503 with Retry-After when that takes longer than
   * `readTimeoutMs` or outlasts the read's database deadline. For a read whose statement found {@link unsettledFor} true: it then reads again.
   */
  async catchUp(orgId: number): Promise<void> {
    // The read's database deadline bounds the wait too: its first statement may have taken most of
    // that deadline, and a wait of its own after it put the 503 up to `readTimeoutMs` later, at or
    // past API.md §3's 5 s once the machine is loaded.
    const deadline = Math.min(Date.now() + this.options.readTimeoutMs, currentDatabaseDeadline() ?? Infinity);
    const reached = await this.forgetShown(orgId, deadline);
    if (reached === undefined) return;
    this.readsHeld?.inc({ outcome: reached ? 'caught_up' : 'unavailable' });
    if (!reached)
      throw baseError(
        'Unavailable',
        "Searches and reads do not show this organization's latest writes yet: try again shortly",
        { 'Retry-After': '1' },
      );
  }

  /**
   * Whether the read model shows every recorded write of `orgId` and what it derives by `deadline`,
   * then forgotten; undefined when it has none.
   */
  private async forgetShown(orgId: number, deadline: number): Promise<boolean | undefined> {
    const { rows } = await this.pool.query<{ id: string; written: Settling[] }>(
      prepared(`SELECT id, written FROM ${UNSETTLED_WRITES} WHERE org_id = $1`, [orgId]),
    );
    if (rows.length === 0) return undefined;
    const written = rows.flatMap((row) => row.written);
    // A stream whose event a consumer parked shows no later version until an operator's retry (API.md
    // §12: it is counted and alerted on, and takes no write meanwhile): waiting for it would hold every
    // read of the organization behind one event. So are the streams a process manager appended to for
    // these writes (an item's inventory, an order), when the projector parked one of their events.
    const parked = await this.store.parkedStreams(written.map((stream) => stream.streamId));
    const reached = await this.reached(
      written.filter((stream) => !parked.has(stream.streamId)),
      deadline,
      { passParked: true },
    );
    if (reached)
      await this.pool.query(
        prepared(`DELETE FROM ${UNSETTLED_WRITES} WHERE id = ANY($1::bigint[])`, [rows.map((row) => row.id)]),
      );
    return reached;
  }

  /**
   * Forgets the recorded writes the read model shows of organizations that have not read since
   * ({@link SWEEP_INTERVAL_MS}), so that the table holds only writes still not shown.
   */
  private async sweep(): Promise<void> {
    if (this.sweeping) return;
    this.sweeping = true;
    try {
      const { rows } = await this.pool.query<{ org_id: string }>(
        prepared(`SELECT org_id FROM ${UNSETTLED_WRITES} GROUP BY org_id ORDER BY min(id) LIMIT $1`, [
          SWEEP_ORGS,
        ]),
      );
      for (const { org_id } of rows) await this.forgetShown(Number(org_id), Date.now() + SWEEP_WAIT_MS);
    } catch (error) {
      this.logger.warn({ err: error }, 'read-your-writes could not forget the recorded writes shown');
    } finally {
      this.sweeping = false;
    }
  }

  /**
   * Whether the read model shows `written` and what it derives by `deadline`; looked at once unless
   * nothing was announced since `since` (a {@link mark}). With `passParked`, a stream a manager
   * appended to that has a parked event is not waited for (a read's wait, {@link catchUp}).
   */
  private async reached(
    written: readonly Settling[],
    deadline: number,
    options: { since?: number | undefined; passParked?: boolean },
  ): Promise<boolean> {
    const reached = await Promise.all([
      ...written.map((stream) => this.until({ kind: 'projected', ...stream }, deadline, options.since)),
      ...written.flatMap((stream) =>
        this.managers
          .filter((manager) => manager.streamTypes.includes(stream.streamType))
          .map((manager) =>
            this.derived(manager, stream, deadline, options).catch((error: unknown) => {
              this.logger.warn({ err: error }, 'read-your-writes could not follow what the write derives');
              return false;
            }),
          ),
      ),
    ]);
    return reached.every(Boolean);
  }

  /**
   * Records writes answered before the read model showed them, committed before their response goes
   * out, so that their organization's next reads wait for them. When that fails (the database is down
   * or hung), the response still goes out: the write is committed, and a 503 would have a client
   * without an Idempotency-Key apply it again (one with a key would be replayed the same 2xx, without
   * a wait). The record is then kept in this process and tried again ({@link recordAgain}) until made:
   * meanwhile reads fail with the database, and a read in the moment between the database answering
   * again and the next try may still miss the write (read_your_writes_unrecorded_writes counts them).
   */
  private async recordUnsettled(written: readonly WrittenStream[]): Promise<void> {
    const streams = written.map(({ position: _, ...stream }) => stream);
    const named = streams.map(({ streamId, version }) => ({ streamId, version }));
    try {
      await this.insertUnsettled(streams);
      this.logger.warn(
        { streams: named },
        "read model did not catch up in time: answering, and the organization's reads wait for it",
      );
    } catch (error) {
      this.unrecorded.push(streams);
      this.logger.error(
        { err: error, streams: named },
        'read model did not catch up in time, and the write could not be recorded as unsettled: answering, and recording it again until the database takes it',
      );
    }
  }

  /** Tries again the records {@link recordUnsettled} could not make, oldest first, until one fails. */
  private async recordAgain(): Promise<void> {
    if (this.recording) return;
    this.recording = true;
    try {
      while (this.unrecorded.length > 0) {
        const streams = this.unrecorded[0]!;
        await withDatabaseDeadline(Date.now() + RECORD_BOUND_MS, () => this.insertUnsettled(streams));
        this.unrecorded.shift();
        this.logger.warn(
          { streams: streams.map(({ streamId, version }) => ({ streamId, version })) },
          "a write answered before the read model showed it is recorded at last: the organization's reads wait for it",
        );
      }
    } catch {
      // Still failing: the next interval tries again, and the gauge shows how many wait.
    } finally {
      this.recording = false;
    }
  }

  /** One row per organization written, so that each organization's reads find their own. */
  private async insertUnsettled(streams: readonly Settling[]): Promise<void> {
    for (const orgId of new Set(streams.map((stream) => stream.orgId)))
      await this.pool.query(
        prepared(`INSERT INTO ${UNSETTLED_WRITES} (org_id, written) VALUES ($1, $2)`, [
          orgId,
          JSON.stringify(streams.filter((stream) => stream.orgId === orgId)),
        ]),
      );
  }

  /** The manager handled the stream's version, and the projector applied what it appended. */
  private async derived(
    manager: ProcessManager,
    stream: Settling,
    deadline: number,
    { since, passParked }: { since?: number | undefined; passParked?: boolean },
  ): Promise<boolean> {
    const { streamId, version } = stream;
    if (!(await this.until({ kind: 'handled', manager: manager.name, streamId, version }, deadline, since)))
      return false;
    const targets = new Set<string>();
    for (const change of stream.changes)
      for (const target of await manager.appendsTo({ ...stream, data: change })) targets.add(target);
    if (targets.size === 0) return true;
    const versions = await this.store.streamVersions([...targets]);
    const parked = passParked ? await this.store.parkedStreams([...versions.keys()]) : new Set<string>();
    const reached = await Promise.all(
      [...versions]
        .filter(([target]) => !parked.has(target))
        .map(([target, at]) =>
          this.until({ kind: 'projected', streamId: target, version: at }, deadline, since),
        ),
    );
    return reached.every(Boolean);
  }

  private until(awaited: Awaited, deadline: number, since: number | undefined): Promise<boolean> {
    return new Promise((resolve) => {
      const waiter: Waiter = {
        awaited,
        resolve,
        timer: setTimeout(() => this.release(waiter, false), Math.max(0, deadline - Date.now())),
      };
      this.waiters.add(waiter);
      if (since !== this.announced) void this.check();
    });
  }

  private release(waiter: Waiter, reached: boolean): void {
    clearTimeout(waiter.timer);
    if (this.waiters.delete(waiter)) waiter.resolve(reached);
  }

  private async check(): Promise<void> {
    if (this.waiters.size === 0) return;
    if (this.checking) {
      this.recheck = true;
      return;
    }
    this.checking = true;
    try {
      do {
        this.recheck = false;
        const pending = [...this.waiters];
        const projecting = pending.filter((waiter) => waiter.awaited.kind === 'projected');
        const handling = pending.filter((waiter) => waiter.awaited.kind === 'handled');
        const [projected, handled] = await Promise.all([
          projecting.length === 0
            ? new Map<string, number>()
            : projectedVersions(this.pool, [...new Set(projecting.map((w) => w.awaited.streamId))]),
          handling.length === 0
            ? new Map<string, number>()
            : handledVersions(
                this.pool,
                handling.map(({ awaited }) => ({
                  manager: awaited.kind === 'handled' ? awaited.manager : '',
                  streamId: awaited.streamId,
                })),
              ),
        ]);
        for (const waiter of pending) {
          const { awaited } = waiter;
          const at =
            awaited.kind === 'projected'
              ? projected.get(awaited.streamId)
              : handled.get(handledKey(awaited.manager, awaited.streamId));
          if ((at ?? 0) >= awaited.version) this.release(waiter, true);
        }
      } while (this.recheck && this.waiters.size > 0);
    } catch (error) {
      this.logger.warn({ err: error }, 'read-your-writes check failed');
    } finally {
      this.checking = false;
    }
  }
}
