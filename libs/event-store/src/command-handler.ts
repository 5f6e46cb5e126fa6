import { setTimeout as sleep } from 'node:timers/promises';
import type { PoolClient } from '@ofp/runtime';
import { WrongExpectedVersion } from './errors.js';
import type { AppendInput, AppendResult, EventStore } from './event-store.js';

/** What a command decided on the state it loaded. */
export interface Decided<R> {
  /**
   * The events to append, each stream at the version the decision read (0 for a new stream). A
   * stream with no events is left alone; with none at all, the command changes nothing.
   */
  readonly appends: readonly AppendInput[];
  /**
   * Writes that must commit or fail with the events (unique-value reservations, idempotency records,
   * a process manager's handled mark, a table the service keeps beside its events). It runs even when
   * no stream has events, in a transaction of its own.
   */
  readonly alsoInTransaction?: (client: PoolClient, results: AppendResults) => Promise<void>;
  /** The command's outcome once committed. */
  readonly outcome: (results: AppendResults) => R;
}

/** Each appended stream's version and position after the append, by stream id. */
export type AppendResults = ReadonlyMap<string, AppendResult>;

/**
 * A command, declared: what it reads and what it decides on what it read. {@link handleCommand} does
 * the rest (the append at the versions read, the transaction, the retry after a lost race), so a
 * command's author writes no append and no loop.
 */
export interface Command<S, R> {
  /**
   * Reads the state the decision needs: the streams it appends to, at their versions, and whatever
   * else it decides on (the ids a create takes, the time it is decided at). Read again after a lost race.
   */
  readonly load: () => Promise<S>;
  /**
   * Decides on the loaded state, without I/O: the events, what commits with them, the outcome. A
   * refusal is a domain error thrown: nothing is appended.
   */
  readonly decide: (state: S) => Decided<R>;
  /**
   * Reads what only the decision names (the inventory totals a shipment moves) and refuses the
   * decision with a domain error before anything is appended.
   */
  readonly check?: (decided: Decided<R>) => Promise<void>;
  /** How often a command is decided in all before a lost race is given up (default {@link MAX_ATTEMPTS}). */
  readonly maxAttempts?: number;
  /** Errors besides WrongExpectedVersion that mean another writer got there first (a unique value taken). */
  readonly isRace?: (error: unknown) => boolean;
  /**
   * Looks at a lost race before the command is decided again, and throws when the race is the
   * caller's to lose: a client that pinned the version with If-Match (412), a create at a taken id (409).
   */
  readonly onRace?: (error: unknown) => void;
}

/** What {@link handleCommand} needs of the event store: its transactional append. */
export type CommandStore = Pick<EventStore, 'appendToStreams'>;

/**
 * How often a command is decided again after losing a race to a concurrent writer. Shipments of one
 * fulfillment order all append to its stream, so a burst of them queues there: each round one wins,
 * and the others decide again on its result.
 */
export const MAX_ATTEMPTS = 40;

/**
 * The command handler of every aggregate (compare Emmett's `CommandHandler`): loads the command's
 * state, decides on it, and appends the decided events at the versions decided on, in one
 * transaction with `alsoInTransaction`. When another writer appended first, the command is loaded and
 * decided again on the new state, after a short random pause that spreads the losers of one round apart.
 */
export async function handleCommand<S, R>(store: CommandStore, command: Command<S, R>): Promise<R> {
  const maxAttempts = command.maxAttempts ?? MAX_ATTEMPTS;
  for (let attempt = 1; ; attempt++) {
    const decided = command.decide(await command.load());
    const appends = decided.appends.filter((append) => append.events.length > 0);
    if (appends.length === 0 && !decided.alsoInTransaction) return decided.outcome(new Map());
    await command.check?.(decided);
    const resultsOf = (list: readonly AppendResult[]): AppendResults =>
      new Map(appends.map((append, i) => [append.streamId, list[i]!]));
    const also = decided.alsoInTransaction;
    try {
      // Without writes beside them, one stream's events are a statement of their own (no transaction).
      const list = await store.appendToStreams(
        appends,
        also && ((client, appended) => also(client, resultsOf(appended))),
      );
      return decided.outcome(resultsOf(list));
    } catch (error) {
      if (!(error instanceof WrongExpectedVersion) && !command.isRace?.(error)) throw error;
      command.onRace?.(error);
      if (attempt >= maxAttempts) throw error;
      await sleep(Math.random() * 5 * Math.min(attempt, 10));
    }
  }
}
