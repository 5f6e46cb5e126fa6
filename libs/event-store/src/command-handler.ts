import { setTimeout as sleep } from 'node:timers/promises';
import type { PoolClient } from '@ofp/runtime';
import { WrongExpectedVersion } from './errors.js';
import type { AppendInput, AppendResult, EventStore } from './event-store.js';

/** What one attempt of a command decided, on the state it loaded. */
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

export interface CommandOptions {
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

/**
 * How often a command is decided again after losing a race to a concurrent writer. Shipments of one
 * fulfillment order all append to its stream, so a burst of them queues there: each round one wins,
 * and the others decide again on its result.
 */
export const MAX_ATTEMPTS = 40;

/**
 * The command handler of every aggregate (compare Emmett's `handleCommand`): `decide` loads the
 * state it needs and decides on it (pure decisions, domain errors thrown as values); the decided
 * events are appended at the versions decided on, in one transaction with `alsoInTransaction`. When
 * another writer appended first, the command is decided again on the new state, after a short
 * random pause that spreads the losers of one round apart.
 */
export async function handleCommand<R>(
  store: EventStore,
  decide: () => Promise<Decided<R>>,
  options: CommandOptions = {},
): Promise<R> {
  const maxAttempts = options.maxAttempts ?? MAX_ATTEMPTS;
  for (let attempt = 1; ; attempt++) {
    const decided = await decide();
    const appends = decided.appends.filter((append) => append.events.length > 0);
    if (appends.length === 0 && !decided.alsoInTransaction) return decided.outcome(new Map());
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
      if (!(error instanceof WrongExpectedVersion) && !options.isRace?.(error)) throw error;
      options.onRace?.(error);
      if (attempt >= maxAttempts) throw error;
      await sleep(Math.random() * 5 * Math.min(attempt, 10));
    }
  }
}
