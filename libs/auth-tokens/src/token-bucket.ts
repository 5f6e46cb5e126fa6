import type { Clock } from './clock.js';

/** A bucket of `capacity` tokens that refills continuously at `refillPerSecond`. */
export interface TokenBucketConfig {
  capacity: number;
  refillPerSecond: number;
}

export interface BucketState {
  tokens: number;
  /** Epoch milliseconds of the last update. */
  at: number;
}

export interface BucketDecision {
  allowed: boolean;
  state: BucketState;
  /** Whole tokens left after this request. */
  remaining: number;
  /** Seconds until one token is available again (0 when one is). */
  retryAfterSeconds: number;
  /** Seconds until the bucket is full again. */
  resetSeconds: number;
}

/**
 * Takes one token from a bucket at time `now` (pure: the caller keeps the state). A missing state is a
 * full bucket. Seconds are rounded up, so a client that waits as told finds a token.
 */
export function takeToken(
  state: BucketState | undefined,
  config: TokenBucketConfig,
  now: number,
): BucketDecision {
  const elapsedSeconds = state === undefined ? 0 : Math.max(0, now - state.at) / 1000;
  const available = Math.min(
    config.capacity,
    (state?.tokens ?? config.capacity) + elapsedSeconds * config.refillPerSecond,
  );
  const allowed = available >= 1;
  const tokens = allowed ? available - 1 : available;
  return {
    allowed,
    state: { tokens, at: now },
    remaining: Math.floor(tokens),
    retryAfterSeconds: tokens >= 1 ? 0 : Math.ceil((1 - tokens) / config.refillPerSecond),
    resetSeconds: Math.ceil((config.capacity - tokens) / config.refillPerSecond),
  };
}

/** When (epoch milliseconds) a bucket has refilled completely. */
function fullAt(state: BucketState, config: TokenBucketConfig): number {
  return state.at + ((config.capacity - state.tokens) / config.refillPerSecond) * 1000;
}

/**
 * One bucket per key, in memory. Buckets that have refilled completely are forgotten (a full bucket is
 * what a missing one means), so memory follows the number of recently active keys.
 */
export class TokenBucketLimiter {
  private readonly buckets = new Map<string, BucketState>();
  private sweptAt = 0;

  constructor(
    readonly config: TokenBucketConfig,
    private readonly clock: Clock,
  ) {
    if (!(config.capacity >= 1) || !(config.refillPerSecond > 0)) {
      throw new RangeError('a token bucket needs capacity >= 1 and refillPerSecond > 0');
    }
  }

  take(key: string): BucketDecision {
    const now = this.clock().getTime();
    this.sweep(now);
    const decision = takeToken(this.buckets.get(key), this.config, now);
    this.buckets.set(key, decision.state);
    return decision;
  }

  /** What {@link take} would decide now, without taking anything. */
  peek(key: string): BucketDecision {
    return takeToken(this.buckets.get(key), this.config, this.clock().getTime());
  }

  /** Buckets currently kept (for tests and metrics). */
  get size(): number {
    return this.buckets.size;
  }

  private sweep(now: number): void {
    const fullRefillMs = (this.config.capacity / this.config.refillPerSecond) * 1000;
    if (now - this.sweptAt < fullRefillMs) return;
    this.sweptAt = now;
    for (const [key, state] of this.buckets) if (fullAt(state, this.config) <= now) this.buckets.delete(key);
  }
}
