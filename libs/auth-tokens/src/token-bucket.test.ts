import { TokenBucketLimiter, takeToken } from './token-bucket.js';

const config = { capacity: 3, refillPerSecond: 0.5 };

describe('takeToken', () => {
  it('treats an unknown bucket as full', () => {
    const decision = takeToken(undefined, config, 1_000);
    expect(decision).toMatchObject({ allowed: true, remaining: 2, retryAfterSeconds: 0, resetSeconds: 2 });
  });

  it('refuses once the bucket is empty and says when the next token comes', () => {
    let state = takeToken(undefined, config, 0).state;
    state = takeToken(state, config, 0).state;
    state = takeToken(state, config, 0).state;
    const refused = takeToken(state, config, 0);
    expect(refused).toMatchObject({ allowed: false, remaining: 0, retryAfterSeconds: 2, resetSeconds: 6 });
    expect(refused.state.tokens).toBe(0);
  });

  it('refills continuously and never beyond capacity', () => {
    const empty = { tokens: 0, at: 0 };
    expect(takeToken(empty, config, 1_999).allowed).toBe(false);
    expect(takeToken(empty, config, 2_000)).toMatchObject({ allowed: true, remaining: 0 });
    expect(takeToken(empty, config, 3_600_000)).toMatchObject({ allowed: true, remaining: 2 });
  });

  it('rounds the retry delay up so that waiting as told is enough', () => {
    const decision = takeToken({ tokens: 0.3, at: 0 }, { capacity: 1, refillPerSecond: 1 }, 0);
    expect(decision).toMatchObject({ allowed: false, retryAfterSeconds: 1, resetSeconds: 1 });
  });
});

describe('TokenBucketLimiter', () => {
  it('keeps one bucket per key', () => {
    let now = 0;
    const limiter = new TokenBucketLimiter({ capacity: 1, refillPerSecond: 1 }, () => new Date(now));
    expect(limiter.take('a').allowed).toBe(true);
    expect(limiter.take('a').allowed).toBe(false);
    expect(limiter.take('b').allowed).toBe(true);
    now = 1_000;
    expect(limiter.take('a').allowed).toBe(true);
  });

  it('peeks at a bucket without taking from it', () => {
    const limiter = new TokenBucketLimiter({ capacity: 1, refillPerSecond: 1 }, () => new Date(0));
    expect(limiter.peek('a').allowed).toBe(true);
    expect(limiter.peek('a').allowed).toBe(true);
    limiter.take('a');
    expect(limiter.peek('a')).toMatchObject({ allowed: false, retryAfterSeconds: 1 });
  });

  it('forgets buckets that have refilled completely', () => {
    let now = 0;
    const limiter = new TokenBucketLimiter({ capacity: 2, refillPerSecond: 1 }, () => new Date(now));
    limiter.take('a');
    limiter.take('b');
    expect(limiter.size).toBe(2);
    now = 5_000;
    limiter.take('c');
    expect(limiter.size).toBe(1);
  });

  it('rejects a configuration that could never admit a request', () => {
    expect(() => new TokenBucketLimiter({ capacity: 0, refillPerSecond: 1 }, () => new Date())).toThrow(
      RangeError,
    );
  });
});
