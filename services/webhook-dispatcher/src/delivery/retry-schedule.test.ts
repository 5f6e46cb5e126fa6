import type { AttemptFacts } from './retry-schedule.js';
import { judgeAttempt, MAX_ATTEMPTS, parseRetryAfter, RETRY_DELAYS_MS } from './retry-schedule.js';

const NOW = new Date('2026-11-21T07:30:00.000Z');
const failed = (statusCode: number | null, retryAfter: string | null = null): AttemptFacts => ({
  statusCode,
  errorKind: statusCode === null ? 'refused' : 'http_status',
  retryAfter,
});
const waitOf = (verdict: ReturnType<typeof judgeAttempt>): number => {
  if (verdict.status !== 'pending') throw new Error(`expected a retry, got ${verdict.status}`);
  return verdict.nextAttemptAt.getTime() - NOW.getTime();
};

describe('the retry schedule (API.md §8)', () => {
  it('waits 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h after attempts 1 to 7', () => {
    const waits = RETRY_DELAYS_MS.map((_, index) =>
      waitOf(judgeAttempt(failed(500), index + 1, NOW, () => 0)),
    );
    expect(waits).toEqual([5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000]);
  });

  it('gives up after the eighth attempt, without disabling the endpoint', () => {
    expect(MAX_ATTEMPTS).toBe(8);
    expect(judgeAttempt(failed(null), MAX_ATTEMPTS, NOW, () => 0)).toEqual({
      status: 'failed',
      disableEndpoint: false,
    });
  });

  it('stretches each wait by up to 10% jitter, never shortening it', () => {
    for (const [attempt, base] of RETRY_DELAYS_MS.entries()) {
      const least = waitOf(judgeAttempt(failed(503), attempt + 1, NOW, () => 0));
      const most = waitOf(judgeAttempt(failed(503), attempt + 1, NOW, () => 0.999_999));
      const middle = waitOf(judgeAttempt(failed(503), attempt + 1, NOW, () => 0.5));
      expect(least).toBe(base);
      expect(most).toBeLessThanOrEqual(base * 1.1);
      expect(most).toBeGreaterThan(base * 1.099);
      expect(middle).toBe(Math.round(base * 1.05));
    }
  });

  it('succeeds on a 2xx in time', () => {
    expect(judgeAttempt({ statusCode: 204, errorKind: null, retryAfter: null }, 1, NOW, () => 0)).toEqual({
      status: 'succeeded',
    });
  });

  it('gives up at once on 410 Gone and asks for the endpoint to be disabled', () => {
    expect(judgeAttempt(failed(410), 1, NOW, () => 0)).toEqual({ status: 'failed', disableEndpoint: true });
  });

  it('honours Retry-After on 429 and 503 when it asks for later than the schedule', () => {
    expect(waitOf(judgeAttempt(failed(429, '120'), 1, NOW, () => 0))).toBe(120_000);
    expect(
      waitOf(judgeAttempt(failed(503, new Date(NOW.getTime() + 90_000).toUTCString()), 1, NOW, () => 0)),
    ).toBe(90_000);
  });

  it('keeps the schedule when Retry-After asks for sooner, is malformed, or comes with another status', () => {
    expect(waitOf(judgeAttempt(failed(429, '1'), 3, NOW, () => 0))).toBe(1_800_000);
    expect(waitOf(judgeAttempt(failed(503, 'soon'), 1, NOW, () => 0))).toBe(5_000);
    expect(waitOf(judgeAttempt(failed(500, '600'), 1, NOW, () => 0))).toBe(5_000);
  });

  it('bounds Retry-After by the longest wait of the schedule', () => {
    expect(waitOf(judgeAttempt(failed(429, String(7 * 24 * 3600)), 1, NOW, () => 0))).toBe(36_000_000);
  });

  it('reads Retry-After as delay-seconds or an HTTP-date (RFC 9110 §10.2.3)', () => {
    expect(parseRetryAfter(' 30 ', NOW)).toBe(30_000);
    expect(parseRetryAfter('Sat, 21 Nov 2026 07:31:00 GMT', NOW)).toBe(60_000);
    expect(parseRetryAfter('Sat, 21 Nov 2026 07:00:00 GMT', NOW)).toBe(0);
    expect(parseRetryAfter('-5', NOW)).toBeUndefined();
    expect(parseRetryAfter('1.5', NOW)).toBeUndefined();
    expect(parseRetryAfter('2026-11-21', NOW)).toBeUndefined();
  });
});
