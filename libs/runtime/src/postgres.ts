import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import { context } from '@opentelemetry/api';
import pg from 'pg';
import { Counter, Gauge, type Registry } from 'prom-client';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

pg.types.setTypeParser(pg.types.builtins.INT8, parseBigint);

/**
 * A `bigint` (int8) value: ids, positions, versions and counters, as numbers, which hold them exactly
 * up to 2^53 - 1 (the registry bounds every id and integer column within). One beyond would be rounded
 * by a number (9223372036854775807 reads as 9223372036854775808): it comes as a BigInt instead, which
 * no arithmetic with numbers and no JSON.stringify takes silently. (`numeric` values stay strings,
 * pg's default.)
 */
export function parseBigint(value: string): number | bigint {
  const number = Number(value);
  return Number.isSafeInteger(number) ? number : BigInt(value);
}

export interface PoolOptions {
  connectionString: string;
  max?: number;
  applicationName: string;
  /**
   * Plan named statements once, generically (`plan_cache_mode = force_generic_plan`), for a pool whose
   * statements Postgres would otherwise plan at every call for no better plan (see `prepared`).
   */
  genericPlans?: boolean;
  /**
   * More session settings (`enable_seqscan: 'off'`), sent with the connection's start-up packet as
   * `genericPlans`' is; their values hold no spaces, which the packet's `options` would split on.
   */
  settings?: Readonly<Record<string, string>>;
  /** How long the database may take; without them, only a request's deadline bounds a statement. */
  timeouts?: DatabaseTimeouts;
  /** Where the pool's metrics go, labelled with `applicationName` ({@link observePool}). */
  metrics?: Registry;
}

/**
 * How long the database may take before an operation fails (API.md §3 and §12: while the database
 * hangs, requests answer 503 within 5 s). The server enforces the first three; it cannot while it
 * hangs (a stopped Postgres keeps its TCP connections open and answers nothing), so the client also
 * gives every statement a deadline of its own: {@link ANSWER_GRACE_MS} past `statementMs`, or a
 * request's deadline ({@link withDatabaseDeadline}), whichever comes first. A connection whose
 * statement missed its deadline is dropped, never reused.
 */
export interface DatabaseTimeouts {
  /** `statement_timeout`: the server cancels a statement that runs longer. */
  readonly statementMs: number;
  /** `lock_timeout`: a statement that waits longer for a lock fails. */
  readonly lockMs: number;
  /**
   * `idle_in_transaction_session_timeout`: the server ends a session that sits in a transaction longer
   * (a process frozen mid-transaction), releasing its locks.
   */
  readonly idleInTransactionMs: number;
  /** Longest wait for a connection: a free one of the pool, or a new one opened. */
  readonly connectMs: number;
}

/**
 * How much longer than its `statement_timeout` the client waits for a statement's answer before it
 * takes the server for hung: the server's own cancellation comes first whenever the server runs.
 */
export const ANSWER_GRACE_MS = 2_000;

/**
 * The database did not answer in time: a statement or a wait for a connection passed its deadline
 * (the connection, if any, was dropped). The database counts as unavailable: a 503 (API.md §3).
 */
export class DatabaseTimeout extends Error {
  override readonly name = 'DatabaseTimeout';
  constructor(what: string, ms: number, options?: ErrorOptions) {
    super(`the database did not answer ${what} within ${ms} ms`, options);
  }
}

/** The deadline (epoch ms) of the database work of the current request; Infinity for none at all. */
const deadlines = new AsyncLocalStorage<number>();

/**
 * Runs `work` with every database statement and connection wait it makes bounded by `deadline`
 * (epoch milliseconds): the HTTP pipeline gives each request one, so that a hung database is a 503
 * in time (API.md §3). `undefined` runs it under the pool's own timeouts only, apart from the
 * caller's deadline (work a request starts that must not share its deadline); `Infinity` with no
 * client-side deadline at all (migrations and rebuilds, which may take minutes: they also lift the
 * server's timeouts on their connection).
 */
export function withDatabaseDeadline<T>(deadline: number | undefined, work: () => T): T {
  return deadline === undefined ? deadlines.exit(work) : deadlines.run(deadline, work);
}

/**
 * The database deadline (epoch ms) of the work running now ({@link withDatabaseDeadline}): a request's,
 * so that a wait it makes for something other than a statement (read-your-writes' catch-up) ends there
 * too; Infinity for none at all, undefined outside any.
 */
export function currentDatabaseDeadline(): number | undefined {
  return deadlines.getStore();
}

/** How long the statement starting now may take on the client's side; undefined: no bound. */
function answerTimeout(statementBoundMs: number | undefined): number | undefined {
  const deadline = deadlines.getStore();
  if (deadline === Infinity) return undefined;
  if (deadline === undefined) return statementBoundMs;
  const remaining = Math.max(1, deadline - Date.now());
  return statementBoundMs === undefined ? remaining : Math.min(remaining, statementBoundMs);
}

/** Closes a client's socket at once, whatever the server does: its statements fail, the pool drops it. */
export function dropConnection(client: pg.Client): void {
  (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
}

type Callback = (error: Error | undefined, result?: unknown) => void;

/**
 * The pool's client: each statement gets the deadline of {@link answerTimeout}. One that passes it
 * drops the connection (its socket closed, so the server, once it runs again, rolls its transaction
 * back) and fails with {@link DatabaseTimeout}: pg's own `query_timeout` would leave the statement
 * running on a connection that goes back to the pool and answers the next user's statement late.
 */
class DeadlineClient extends pg.Client {
  private readonly statementBoundMs: number | undefined;
  /** Why the connection was dropped, once a statement passed its deadline. */
  private timedOut: DatabaseTimeout | undefined;
  /** When the pool's statement in flight must have its answer (epoch ms); Infinity while none is. */
  private answerBy = Infinity;
  private answerMs = 0;
  /** The connection's deadline timer for the pool's statements, armed for `timerAt` (Infinity: none). */
  private deadlineTimer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;

  constructor(config: pg.ClientConfig & { statementBoundMs?: number } = {}) {
    super(config);
    this.statementBoundMs = config.statementBoundMs;
  }

  /**
   * Bounds the pool's one statement of this checkout, about to be sent with {@link sendUnbounded}, by
   * the deadline of {@link answerTimeout}; {@link answered} ends it. Unlike `query`, no timer and no
   * callback per statement: the connection keeps one timer, armed for the deadline of the statement in
   * flight and left running between statements, which re-arms itself when it finds a later one. With
   * `query`'s closure around pg's callback, nearly every search's page of JSON outlived the young
   * generation (issue 25: 19 KB promoted per search in the api process, 0.6 KB without; the lean
   * server 0.4 KB), for the old generation's collector to reclaim.
   */
  expectAnswer(): void {
    const ms = answerTimeout(this.statementBoundMs);
    if (ms === undefined) return;
    this.answerBy = Date.now() + ms;
    this.answerMs = ms;
    if (this.answerBy < this.timerAt) this.armDeadline(this.answerBy);
  }

  /** The statement of {@link expectAnswer} answered with `error`: that, or the deadline it missed. */
  answered(error: Error | undefined): Error | undefined {
    this.answerBy = Infinity;
    return this.timedOut ?? error;
  }

  /** pg's own `query` (the callback form), without the deadline `query` gives each statement. */
  sendUnbounded(text: unknown, values: unknown, callback: Callback): void {
    (pg.Client.prototype.query as (...a: unknown[]) => void).call(this, text, values, callback);
  }

  private armDeadline(at: number): void {
    clearTimeout(this.deadlineTimer);
    this.timerAt = at;
    this.deadlineTimer = setTimeout(() => this.deadlinePassed(), Math.max(1, at - Date.now()));
    // Between statements it has nothing to do; while one is in flight, its socket keeps the process up.
    this.deadlineTimer.unref();
  }

  private deadlinePassed(): void {
    this.timerAt = Infinity;
    this.deadlineTimer = undefined;
    if (this.answerBy === Infinity) return;
    if (Date.now() < this.answerBy) return this.armDeadline(this.answerBy);
    this.timedOut = new DatabaseTimeout('a statement', this.answerMs);
    dropConnection(this);
  }

  /**
   * Hands the client back to its pool after its statement failed with `failure` (`release` is the
   * pool's): kept if the server refused the statement and then stands idle outside any transaction (its
   * ReadyForQuery, which follows the error, says so), dropped if the connection failed or the statement
   * left a transaction open or aborted behind it.
   */
  releaseAfter(failure: Error, release: (error?: Error) => void): void {
    const connection = (this as unknown as { connection: pg.Connection }).connection;
    const queryable = (this as unknown as { _queryable: boolean })._queryable;
    if (!(failure instanceof pg.DatabaseError) || failure.severity !== 'ERROR' || !queryable) {
      release(failure);
      return;
    }
    const ready = (message: { status: string }): void => {
      this.off('end', ended);
      release(message.status === 'I' ? undefined : failure);
    };
    const ended = (): void => {
      connection.off('readyForQuery', ready);
      release(failure);
    };
    connection.once('readyForQuery', ready);
    this.once('end', ended);
  }

  // pg's overloads (text, values, callback; a config object; a submittable) are passed through as given.
  override query(...args: unknown[]): never {
    const ms = answerTimeout(this.statementBoundMs);
    const submittable = typeof (args[0] as { submit?: unknown } | undefined)?.submit === 'function';
    const run = (): never => (super.query as (...a: unknown[]) => never)(...args);
    if (ms === undefined || submittable) return run();
    let timedOut: DatabaseTimeout | undefined;
    const timer = setTimeout(() => {
      this.timedOut = timedOut = new DatabaseTimeout('a statement', ms);
      dropConnection(this);
    }, ms);
    const outcome = (error: Error | undefined): Error | undefined => {
      clearTimeout(timer);
      return timedOut ?? error;
    };
    const last = args.length - 1;
    const callback = args[last];
    if (typeof callback === 'function') {
      args[last] = (error: Error | undefined, result: unknown) =>
        (callback as Callback)(outcome(error), result);
      return run();
    }
    return (run() as unknown as Promise<unknown>).then(
      (result) => {
        outcome(undefined);
        return result;
      },
      (error: Error) => {
        throw outcome(error) ?? error;
      },
    ) as never;
  }

  /** The connection's end reads as the deadline that caused it (pool.query fails with this event's error). */
  override emit(event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'error' && this.timedOut) return super.emit(event, this.timedOut);
    return super.emit(event, ...args);
  }
}

/**
 * The pool: a wait for a connection also ends at the current request's deadline, and what follows the
 * wait runs in the waiter's own context (its deadline, its trace).
 */
class DeadlinePool extends pg.Pool {
  /**
   * pg-pool's `query`, except that a statement the server refused keeps its connection: pg-pool
   * releases the client with the statement's error, which drops the connection, so every unique
   * violation (a version race's 409, a webhook's taken external id), every statement cancelled by its
   * timeout, cost the pool a connection: a backend started anew and every named statement parsed and
   * planned again. A connection that failed, or that a statement left in a transaction, still goes.
   */
  override query(text: unknown, values?: unknown, ...rest: unknown[]): never {
    if (typeof values === 'function' || rest.length > 0)
      throw new TypeError('pool.query takes a statement and its values, and answers with a promise');
    return new Promise((resolve, reject) => {
      this.connect((error: Error | undefined, client?: pg.PoolClient) => {
        if (error) return reject(error);
        const pooled = client as pg.PoolClient & DeadlineClient;
        const done = (error: Error | undefined, result?: unknown): void => {
          const failure = pooled.answered(error);
          if (failure) {
            pooled.releaseAfter(failure, (error) => pooled.release(error));
            reject(failure);
          } else {
            pooled.release();
            resolve(result);
          }
        };
        try {
          pooled.expectAnswer();
          pooled.sendUnbounded(text, values, done);
        } catch (failure) {
          done(failure as Error);
        }
      });
    }) as never;
  }

  // The callback form is what pool.query uses; the promise form what callers use.
  override connect(...args: unknown[]): never {
    const deadline = deadlines.getStore();
    const waiter = typeof args[0] === 'function' ? (args[0] as PoolCallback) : undefined;
    // With an idle client for every waiter, this one is served at pg-pool's next pulse (a
    // process.nextTick): no wait for the deadline to bound.
    if (deadline === undefined || deadline === Infinity || this.idleCount > this.waitingCount)
      return (super.connect as (...a: unknown[]) => never)(...(waiter ? [inThisContext(waiter)] : []));
    const ms = Math.max(1, deadline - Date.now());
    const connected = new Promise<pg.PoolClient>((resolve, reject) => {
      let late = false;
      const timer = setTimeout(() => {
        late = true;
        reject(new DatabaseTimeout('with a connection', ms));
      }, ms);
      (super.connect as (cb: Callback) => void)((error, client) => {
        clearTimeout(timer);
        const pooled = client as pg.PoolClient | undefined;
        if (late) pooled?.release();
        else if (error) reject(error);
        else resolve(pooled!);
      });
    });
    if (!waiter) return connected as never;
    // A promise's reaction runs in the context `then` was called in: the waiter's.
    connected.then(
      (client) => waiter(undefined, client, (error?: Error) => client.release(error)),
      (error: Error) => waiter(error),
    );
    return undefined as never;
  }
}

type PoolDone = (error?: Error) => void;
type PoolCallback = (error?: Error, client?: pg.PoolClient, done?: PoolDone) => void;

/**
 * `callback`, run under this call's database deadline and trace context wherever it is called from.
 * pg-pool calls a waiter back from inside release(), or from the pulse another caller scheduled, in that
 * caller's context: as is, pool.query's statement would run under the deadline of whichever request
 * released the connection, as often as not nearly spent (read-your-writes' checks, with no deadline of
 * their own, then failed within 1 ms under load). The two values are carried rather than the whole
 * async context: an `AsyncResource` per checkout ran every async hook's init and the before and after
 * callbacks around the waiter (`AsyncResource.bind` also turned each bound function into a
 * dictionary-mode object); without a tracing SDK, `context.bind` returns the function as it is.
 */
function inThisContext(callback: PoolCallback): PoolCallback {
  const deadline = deadlines.getStore();
  return context.bind(context.active(), (error?: Error, client?: pg.PoolClient, done?: PoolDone) =>
    deadline === undefined
      ? deadlines.exit(callback, error, client, done)
      : deadlines.run(deadline, callback, error, client, done),
  );
}

export function createPool(options: PoolOptions): Pool {
  const timeouts = options.timeouts;
  const pool = new DeadlinePool({
    Client: DeadlineClient,
    connectionString: options.connectionString,
    max: options.max ?? 10,
    application_name: options.applicationName,
    connectionTimeoutMillis: timeouts?.connectMs ?? 10_000,
    idleTimeoutMillis: 30_000,
    // Retire a connection after this many queries, and with it the prepared statements it keeps.
    maxUses: 20_000,
    // A peer that vanished (a partition, a host gone) is found by the kernel rather than never.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    ...(timeouts && {
      statement_timeout: timeouts.statementMs,
      lock_timeout: timeouts.lockMs,
      idle_in_transaction_session_timeout: timeouts.idleInTransactionMs,
      statementBoundMs: timeouts.statementMs + ANSWER_GRACE_MS,
    }),
    // Session settings go with the connection's start-up packet: a statement queued on a new client
    // before the pool's users' made pg warn of concurrent queries on one client at every start.
    ...startupOptions(options),
  });
  if (options.metrics) observePool(options.metrics, options.applicationName, pool);
  // An idle client losing its connection must not crash the process; the next checkout reconnects.
  pool.on('error', () => {});
  pool.on('connect', (client) => {
    // Nor a checked-out one (pg-pool listens only while a client is idle): a Postgres that crashes
    // sends every backend's client a FATAL, which arrives between the statements of a transaction as
    // often as not. The statement in flight or the next one fails; released with it, the client goes.
    client.on('error', () => {});
  });
  return pool;
}

/** The `options` of a pool's start-up packet: its session settings (`genericPlans`, `settings`). */
function startupOptions(options: PoolOptions): { options?: string } {
  const settings = {
    ...(options.genericPlans ? { plan_cache_mode: 'force_generic_plan' } : {}),
    ...options.settings,
  };
  const flags = Object.entries(settings).map(([name, value]) => `-c ${name}=${value}`);
  return flags.length > 0 ? { options: flags.join(' ') } : {};
}

/** The pools whose metrics each registry has, by name: its gauges read them at every scrape. */
const observedPools = new WeakMap<Registry, Map<string, pg.Pool>>();

/**
 * The pool's metrics: `postgres_pool_connections{pool,state}` (`busy`, `idle`),
 * `postgres_pool_waiting{pool}` (checkouts waiting for a connection) and
 * `postgres_pool_connections_opened_total{pool}`. Under a steady load a pool opens next to no
 * connection (it retires one after `maxUses` statements); one that keeps opening them loses them, to
 * a network that drops them or to statements that end them.
 */
function observePool(registry: Registry, name: string, pool: pg.Pool): void {
  let pools = observedPools.get(registry);
  if (!pools) {
    const observed = (pools = new Map<string, pg.Pool>());
    observedPools.set(registry, observed);
    new Gauge({
      name: 'postgres_pool_connections',
      help: "Connections of the process's Postgres pools, busy (checked out) or idle",
      labelNames: ['pool', 'state'],
      registers: [registry],
      collect() {
        for (const [pool, { totalCount, idleCount }] of observed) {
          this.set({ pool, state: 'busy' }, totalCount - idleCount);
          this.set({ pool, state: 'idle' }, idleCount);
        }
      },
    });
    new Gauge({
      name: 'postgres_pool_waiting',
      help: "Checkouts waiting for a connection of the process's Postgres pools",
      labelNames: ['pool'],
      registers: [registry],
      collect() {
        for (const [pool, { waitingCount }] of observed) this.set({ pool }, waitingCount);
      },
    });
    new Counter({
      name: 'postgres_pool_connections_opened_total',
      help: "Connections the process's Postgres pools opened",
      labelNames: ['pool'],
      registers: [registry],
    });
  }
  pools.set(name, pool);
  const opened = registry.getSingleMetric('postgres_pool_connections_opened_total') as Counter<'pool'>;
  opened.inc({ pool: name }, 0);
  pool.on('connect', () => opened.inc({ pool: name }));
}

/** The names of the statements {@link prepared} has named, by text. */
const statementNames = new Map<string, string>();
/** Texts named at most; a text past them is still prepared, only named again when used. */
const NAMES_KEPT = 10_000;

/**
 * A named statement: Postgres parses it once per connection and, after five runs, plans it once
 * (a generic plan) instead of at every call. For the statements run with every write (appends, the
 * projector's, the readers'), planning cost Postgres more than running them: 990 µs of planning
 * against 378 µs of execution per person write (pg_stat_statements). The name is the text's digest,
 * so one text has one name on every connection; each connection keeps its statements until the
 * pool retires it (`maxUses`).
 */
export function prepared(text: string, values: readonly unknown[]): pg.QueryConfig & { name: string } {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = statementName(text);
    if (statementNames.size < NAMES_KEPT) statementNames.set(text, name);
  }
  return { name, text, values: [...values] };
}

/**
 * A statement's name says what it does and to which table, then a digest of its text that makes it
 * unique (`insert_es.events_Hx3k0Ezq5A`): pg spans (`pg.query:<name>`), `pg_stat_activity` and logs
 * show it, where a digest alone said nothing. Within Postgres's 63 bytes.
 */
export function statementName(text: string): string {
  // What a statement does is its first write (a WITH's insert, say), or else what it reads.
  const verb = /\b(insert|update|delete)\b/i.exec(text) ?? /\b(select)\b/i.exec(text);
  const command = verb?.[1]?.toLowerCase() ?? /^\s*(\w+)/.exec(text)?.[1]?.toLowerCase() ?? 'statement';
  const table = /\b(?:from|into|update|join)\s+([\w.]+)/i
    .exec(text.slice(verb?.index ?? 0))?.[1]
    ?.toLowerCase();
  const digest = createHash('sha1').update(text).digest('base64url').slice(0, 10);
  return `${command}_${(table ?? '').slice(0, 40)}_${digest}`;
}

/**
 * Statements without parameters that a transaction runs first (after BEGIN) and last (before COMMIT),
 * each sent with BEGIN or COMMIT in one round trip (a simple-query string of two statements).
 */
export interface TransactionEnds {
  readonly first?: string;
  readonly last?: string;
}

/**
 * Runs `work` in one transaction on one connection, committing on success and rolling back on error.
 * A connection whose rollback failed (lost, or past its deadline) is dropped from the pool rather
 * than handed to the next user mid-transaction.
 */
export async function inTransaction<T>(
  pool: Pool,
  work: (client: PoolClient) => Promise<T>,
  ends: TransactionEnds = {},
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query(ends.first === undefined ? 'BEGIN' : `BEGIN; ${ends.first}`);
    const result = await work(client);
    await client.query(ends.last === undefined ? 'COMMIT' : `${ends.last}; COMMIT`);
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch((rollback: Error) => (broken = rollback));
    throw error;
  } finally {
    client.release(broken);
  }
}

/**
 * Whether an error means the database (or another dependency) cannot be reached or cannot answer
 * right now, which is a 503 (API.md §3), not a 500: refused or broken connections, Postgres shutting
 * down or out of connections (SQLSTATE classes 08 and 57P, 53300), a statement or lock wait that the
 * server timed out (57014, 55P03, and 25P03 for a session idle in its transaction too long), a
 * transaction that lost to a concurrent one (40001 serialization failure, 40P01 deadlock), a pool
 * that found no connection in time, a pooled client whose connection broke mid-transaction (pg's "Client
 * has encountered a connection error and is not queryable", which has no code: seen as a 500 in the chaos
 * run's Postgres restart), and the client's own deadline ({@link DatabaseTimeout}).
 */
export function isDependencyDown(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  if (error instanceof DatabaseTimeout) return true;
  const code = (error as { code?: unknown }).code;
  if (
    typeof code === 'string' &&
    (/^(08|57P)/.test(code) ||
      ['53300', '57014', '55P03', '25P03', '40001', '40P01'].includes(code) ||
      ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE'].includes(code))
  ) {
    return true;
  }
  const message = (error as { message?: unknown }).message;
  return (
    typeof message === 'string' &&
    /timeout exceeded when trying to connect|Connection terminated|is not queryable/.test(message)
  );
}
