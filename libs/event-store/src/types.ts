/**
 * Where an event stands in the global order: the appending transaction's id, then the position.
 * Ordering by this pair, and reading only transactions older than every one still in flight, gives
 * every reader the same order without ever skipping an event that committed late.
 */
export interface GlobalPosition {
  /** A Postgres xid8, as a decimal string (it may exceed 2^53). */
  readonly transactionId: string;
  readonly position: number;
}

export const START: GlobalPosition = Object.freeze({ transactionId: '0', position: 0 });

/** Negative when `a` comes before `b`, zero when equal, positive after. */
export function comparePositions(a: GlobalPosition, b: GlobalPosition): number {
  const ta = BigInt(a.transactionId);
  const tb = BigInt(b.transactionId);
  if (ta !== tb) return ta < tb ? -1 : 1;
  return a.position - b.position;
}

/** An event as a command handler decides it, before it is stored. */
export interface NewEvent<T = unknown> {
  readonly eventId: string;
  readonly type: string;
  readonly data: T;
  readonly metadata?: Readonly<Record<string, unknown>>;
}

export interface StoredEvent<T = unknown> {
  readonly eventId: string;
  readonly streamId: string;
  /** The category of the stream (`people`, `orders`...): one Kafka topic each. */
  readonly streamType: string;
  /** 1 for a stream's first event, +1 for each next one. */
  readonly version: number;
  readonly type: string;
  readonly orgId: number | null;
  readonly data: T;
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly recordedAt: Date;
  readonly position: GlobalPosition;
}
