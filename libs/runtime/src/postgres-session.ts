import pg from 'pg';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Module } from './lifecycle.js';
import type { Logger } from './logger.js';
import { dropConnection } from './postgres.js';

/** Told of what arrives on a channel the session listens to. */
export interface NotificationListener {
  /** A NOTIFY arrived on the channel. */
  notify(payload: string): void;
  /**
   * The session is connected again after it was lost, and listens to its channels again: whatever
   * was notified meanwhile was missed, so look again for what it would have announced.
   */
  resumed?(): void;
}

/**
 * A session-level advisory lock's key: a text (`pg_try_advisory_lock(hashtext(key))`), or a space
 * and a number in it (`pg_try_advisory_lock(hashtext(space), number)`).
 */
export type AdvisoryKey = string | readonly [space: string, key: number];

/**
 * A session-level advisory lock held on the session's connection: leadership (one active consumer
 * of a group, one outbox relay) or liveness (a webhook worker's claims). It goes with the connection:
 * once the session is lost, `held()` is false, and the holder must stop the work the lock guards and
 * `acquire()` it again (another process may have taken it meanwhile).
 */
export interface SessionLock {
  /** Whether this process holds it now, on the session's live connection. */
  held(): boolean;
  /**
   * Takes it if it is free (or held already by this holder): true when held after the call; false
   * when another process or holder has it, or the session is not connected. Never throws.
   */
  acquire(): Promise<boolean>;
  /** Lets it go (nothing when not held). */
  release(): Promise<void>;
}

export interface PostgresSessionOptions {
  readonly connectionString: string;
  /** `application_name` of the connection (pg_stat_activity). */
  readonly applicationName: string;
  readonly logger: Logger;
  /** Where `postgres_listener_connected` and `postgres_listener_reconnects_total` go, once in use. */
  readonly metrics?: Registry;
}

/** How often the session asks the server whether it still answers. */
const HEARTBEAT_MS = 5_000;
/**
 * Longest answer to a statement of the session (a lock, a LISTEN, a heartbeat): past it the server
 * counts as hung (a stopped Postgres, a peer cut off), and the connection is dropped and made again.
 */
const ANSWER_MS = 10_000;
/** Longest wait for a new connection. */
const CONNECT_MS = 5_000;
/**
 * Backoff between connection attempts: 100 ms doubling up to 1 s. A refused attempt costs Postgres
 * nothing, and each second of waiting past its return is a second of lost leadership and wake-ups.
 */
const reconnectDelay = (failures: number): number => Math.min(1_000, 100 * 2 ** Math.min(failures, 4));

/**
 * The process's one Postgres session for what lives on a connection of its own: LISTEN (the
 * notifications service) and session-level advisory locks. Whatever ends the connection (a crash or
 * restart of Postgres, a terminated backend, a network fault, a server that stopped answering its
 * heartbeat), it connects again with backoff, listens to every channel again and tells each listener
 * (`resumed`), so that nothing waits for a notification that was sent while it was away. Locks do not
 * come back by themselves: each holder sees `held()` false and takes its lock again. Connects on first
 * use; as a module of the process, it closes at stop, after the modules that use it.
 *
 * `postgres_listener_connected` (0 while it is away) and `postgres_listener_reconnects_total` show it.
 */
export class PostgresSession implements Module {
  readonly name = 'postgres-session';
  private client: pg.Client | undefined;
  /**
   * The last statement sent on the current connection: the next one starts when it ends, since pg runs
   * one at a time and its own queue of waiting statements is deprecated (removed in pg@9).
   */
  private tail: Promise<unknown> = Promise.resolve();
  /** The channels LISTENed to on the current connection. */
  private listening = new Set<string>();
  /** Connections made so far: a lock taken on an earlier one is gone. */
  private generation = 0;
  private reconnecting: Promise<void> | undefined;
  /** The connection attempt under way, which ends (never rejects) when it succeeded or failed. */
  private attempt: Promise<void> | undefined;
  private closed = false;
  private wake: (() => void) | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private readonly channels = new Map<string, Set<NotificationListener>>();
  /** The holder of each lock key in this process, while it takes or holds the lock. */
  private readonly holders = new Map<string, SessionLockOnSession>();
  private metrics: { connected: Gauge; reconnects: Counter } | undefined;

  constructor(private readonly options: PostgresSessionOptions) {}

  /** Nothing to do yet: the session connects on first use (a process that uses none has none). */
  start(): Promise<void> {
    return Promise.resolve();
  }

  ready(): boolean {
    return !this.closed;
  }

  /** Stops for good: no reconnection; the locks it holds are released with the connection. */
  async stop(): Promise<void> {
    this.closed = true;
    clearInterval(this.heartbeat);
    this.wake?.();
    await this.reconnecting;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => {});
  }

  /** Whether the session is connected now. */
  connected(): boolean {
    return this.client !== undefined;
  }

  /**
   * Calls `listener` for each notification on `channel` from now on, and `resumed` after each
   * reconnection. Resolves once the channel is listened to (or, while the session is away, at once:
   * it will be at reconnection). The function it resolves with stops listening.
   */
  async listen(channel: string, listener: NotificationListener): Promise<() => Promise<void>> {
    let listeners = this.channels.get(channel);
    if (!listeners) this.channels.set(channel, (listeners = new Set()));
    listeners.add(listener);
    await this.tryConnect();
    if (this.client && !this.listening.has(channel)) {
      await this.query(`LISTEN ${pg.escapeIdentifier(channel)}`).then(
        () => this.listening.add(channel),
        () => {}, // lost meanwhile: the reconnection listens to it
      );
    }
    return async () => {
      listeners.delete(listener);
      if (listeners.size > 0) return;
      this.channels.delete(channel);
      if (this.listening.delete(channel))
        await this.query(`UNLISTEN ${pg.escapeIdentifier(channel)}`).catch(() => {});
    };
  }

  /** The session-level advisory lock of `key` (not taken yet: see {@link SessionLock.acquire}). */
  lock(key: AdvisoryKey): SessionLock {
    return new SessionLockOnSession(this, key);
  }

  /** @internal The lock's side of the session. */
  lockState(): { generation: number; connected: boolean; holders: Map<string, SessionLockOnSession> } {
    return { generation: this.generation, connected: this.client !== undefined, holders: this.holders };
  }

  /**
   * @internal A statement on the session's connection, after those sent before it; a hung one drops
   * the connection. One meant for a connection lost while it waited fails as the connection did.
   */
  query<R extends pg.QueryResultRow>(text: string, values?: unknown[]): Promise<R[]> {
    const client = this.client;
    if (!client) return Promise.reject(new Error('the Postgres session is not connected'));
    const run = this.tail.then(async () => {
      if (this.client !== client) throw new Error('the Postgres session was lost');
      const timer = setTimeout(() => dropConnection(client), ANSWER_MS);
      try {
        return (await client.query<R>(text, values)).rows;
      } finally {
        clearTimeout(timer);
      }
    });
    this.tail = run.catch(() => {});
    return run;
  }

  /**
   * @internal Connected, or no longer trying for now: starts connecting unless connected, connecting
   * or closed, and waits for the attempt under way.
   */
  async tryConnect(): Promise<void> {
    this.connectIfIdle();
    await this.attempt;
  }

  private connectIfIdle(): void {
    if (!this.metrics && this.options.metrics) this.metrics = sessionMetrics(this.options.metrics, this);
    if (this.closed || this.client || this.reconnecting) return;
    this.reconnecting = this.reconnect().finally(() => (this.reconnecting = undefined));
    this.heartbeat ??= setInterval(() => {
      if (this.client) this.query('SELECT 1').catch(() => {}); // a failure ends the connection: see open()
    }, HEARTBEAT_MS).unref();
  }

  private async reconnect(): Promise<void> {
    for (let failures = 0; !this.closed; failures++) {
      if (failures > 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, reconnectDelay(failures));
          this.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        if (this.closed) return;
      }
      let failure: unknown;
      this.attempt = this.open().catch((error: unknown) => void (failure = error ?? new Error('failed')));
      await this.attempt;
      this.attempt = undefined;
      if (failure === undefined) return;
      if (failures === 0 || failures % 10 === 0)
        this.options.logger.warn(
          { err: failure, attempts: failures + 1 },
          'cannot connect the Postgres session (LISTEN, advisory locks); trying again',
        );
    }
  }

  /** One connection: made, listening to every channel, then in use. */
  private async open(): Promise<void> {
    const client = new pg.Client({
      connectionString: this.options.connectionString,
      application_name: this.options.applicationName,
      connectionTimeoutMillis: CONNECT_MS,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
    });
    client.on('notification', (message) => {
      for (const listener of this.channels.get(message.channel) ?? []) listener.notify(message.payload ?? '');
    });
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client));
    try {
      await client.connect();
      const channels = [...this.channels.keys()];
      const timer = setTimeout(() => dropConnection(client), ANSWER_MS);
      try {
        if (channels.length > 0)
          await client.query(channels.map((c) => `LISTEN ${pg.escapeIdentifier(c)}`).join('; '));
      } finally {
        clearTimeout(timer);
      }
      if (this.closed) throw new Error('the Postgres session was closed');
      this.listening = new Set(channels);
    } catch (error) {
      client.removeAllListeners('end');
      client.on('error', () => {});
      dropConnection(client);
      throw error;
    }
    this.client = client;
    this.tail = Promise.resolve();
    this.generation++;
    this.metrics?.connected.set(1);
    if (this.generation === 1) return;
    this.metrics?.reconnects.inc();
    this.options.logger.info(
      { channels: [...this.listening] },
      'the Postgres session is connected again and listens again',
    );
    for (const listeners of this.channels.values())
      for (const listener of listeners) {
        try {
          listener.resumed?.();
        } catch (error) {
          this.options.logger.error({ err: error }, 'a notification listener failed to resume');
        }
      }
  }

  private lost(client: pg.Client, error?: Error): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.listening = new Set();
    const locks = [...this.holders.keys()];
    this.holders.clear();
    this.metrics?.connected.set(0);
    client.removeAllListeners('end');
    client.on('error', () => {});
    dropConnection(client);
    if (this.closed) return;
    this.options.logger.warn(
      { err: error, locks_lost: locks },
      'the Postgres session was lost (its advisory locks with it); connecting again',
    );
    this.connectIfIdle();
  }
}

/** The session's metrics, registered when it is first used (a process that listens to nothing has none). */
function sessionMetrics(
  registry: Registry,
  session: PostgresSession,
): { connected: Gauge; reconnects: Counter } {
  return {
    connected: new Gauge({
      name: 'postgres_listener_connected',
      help: "1 while the process's Postgres session (LISTEN, advisory locks) is connected, 0 while it reconnects",
      registers: [registry],
      collect() {
        this.set(session.connected() ? 1 : 0);
      },
    }),
    reconnects: new Counter({
      name: 'postgres_listener_reconnects_total',
      help: "Times the process's Postgres session (LISTEN, advisory locks) connected again after it was lost",
      registers: [registry],
    }),
  };
}

class SessionLockOnSession implements SessionLock {
  private readonly id: string;
  private readonly statement: { lock: string; unlock: string; values: unknown[] };
  /** The session's generation it was taken on. */
  private heldOn: number | undefined;

  constructor(
    private readonly session: PostgresSession,
    key: AdvisoryKey,
  ) {
    if (typeof key === 'string') {
      this.id = key;
      this.statement = {
        lock: 'SELECT pg_try_advisory_lock(hashtext($1)) AS locked',
        unlock: 'SELECT pg_advisory_unlock(hashtext($1))',
        values: [key],
      };
    } else {
      this.id = `${key[0]}\u0000${key[1]}`;
      this.statement = {
        lock: 'SELECT pg_try_advisory_lock(hashtext($1), $2) AS locked',
        unlock: 'SELECT pg_advisory_unlock(hashtext($1), $2)',
        values: [key[0], key[1]],
      };
    }
  }

  held(): boolean {
    const { generation, connected } = this.session.lockState();
    return connected && this.heldOn === generation;
  }

  async acquire(): Promise<boolean> {
    if (this.held()) return true;
    await this.session.tryConnect();
    const { generation, connected, holders } = this.session.lockState();
    // Session locks are reentrant: within the process, one holder per key, or two would both hold it.
    const holder = holders.get(this.id);
    if (!connected || (holder !== undefined && holder !== this)) return false;
    holders.set(this.id, this);
    let locked = false;
    try {
      const rows = await this.session.query<{ locked: boolean }>(this.statement.lock, this.statement.values);
      locked = rows[0]?.locked === true;
    } catch {
      // The session was lost meanwhile, and the lock with it.
    }
    const now = this.session.lockState();
    if (locked && now.generation === generation && now.connected) {
      this.heldOn = generation;
      return true;
    }
    if (now.holders.get(this.id) === this) now.holders.delete(this.id);
    return false;
  }

  async release(): Promise<void> {
    const wasHeld = this.held();
    this.heldOn = undefined;
    const { holders } = this.session.lockState();
    if (holders.get(this.id) === this) holders.delete(this.id);
    if (wasHeld) await this.session.query(this.statement.unlock, this.statement.values).catch(() => {});
  }
}
