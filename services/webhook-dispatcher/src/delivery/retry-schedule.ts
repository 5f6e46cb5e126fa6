import type { AttemptRecord } from './attempt.js';

/** API.md §8: the waits before the 2nd to 8th attempt, counted from the attempt before. */
export const RETRY_DELAYS_MS: readonly number[] = [
  5_000,
  5 * 60_000,
  30 * 60_000,
  2 * 3_600_000,
  5 * 3_600_000,
  10 * 3_600_000,
  10 * 3_600_000,
];

/** Attempts of one delivery before it is given up: the first and one per retry delay. */
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;

/**
 * API.md §8 "with up to 10% jitter": each wait is stretched by up to this fraction, never shortened, so
 * that endpoints recovering from an outage are not hit by every retry at the same instant.
 */
export const MAX_JITTER = 0.1;

/**
 * `Retry-After` on 429/503 is honoured (the next attempt comes no earlier than it asks) up to this
 * bound, the schedule's longest wait, so that a hostile or broken header cannot park a delivery.
 */
export const MAX_RETRY_AFTER_MS = 10 * 3_600_000;

/** API.md §8: an endpoint whose deliveries have all failed for this long is disabled. */
export const FAILING_PERIOD_MS = 5 * 24 * 3_600_000;

/** What a finished attempt means for its delivery. */
export type AttemptVerdict =
  | { readonly status: 'succeeded' }
  | { readonly status: 'pending'; readonly nextAttemptAt: Date }
  | { readonly status: 'failed'; readonly disableEndpoint: boolean };

/** The facts of a finished attempt that decide what comes next. */
export type AttemptFacts = Pick<AttemptRecord, 'statusCode' | 'errorKind' | 'retryAfter'>;

/**
 * Decides a delivery's next step after an attempt (API.md §8): a 2xx succeeded; 410 Gone gives the
 * delivery up and disables the endpoint at once; anything else is retried on the schedule, later when
 * a 429/503 asks for it with `Retry-After`, until `MAX_ATTEMPTS` tries of this round have failed.
 *
 * @param attempts tries of the current round, the finished one included (`retry`/`recover` start a round).
 * @param random a number in [0, 1), for the jitter.
 */
export function judgeAttempt(
  facts: AttemptFacts,
  attempts: number,
  now: Date,
  random: () => number,
): AttemptVerdict {
  if (facts.errorKind === null) return { status: 'succeeded' };
  const code = facts.statusCode;
  if (code === 410) return { status: 'failed', disableEndpoint: true };
  const scheduled = RETRY_DELAYS_MS[attempts - 1];
  if (scheduled === undefined) return { status: 'failed', disableEndpoint: false };
  const jittered = scheduled * (1 + MAX_JITTER * random());
  const asked =
    (code === 429 || code === 503) && facts.retryAfter !== null
      ? parseRetryAfter(facts.retryAfter, now)
      : undefined;
  const wait = asked === undefined ? jittered : Math.max(jittered, Math.min(asked, MAX_RETRY_AFTER_MS));
  return { status: 'pending', nextAttemptAt: new Date(now.getTime() + Math.round(wait)) };
}

/**
 * `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date, as milliseconds from `now`;
 * undefined when it is neither.
 */
export function parseRetryAfter(value: string, now: Date): number | undefined {
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  // An IMF-fixdate always names the weekday; this keeps bare numbers-with-junk out of Date.parse.
  if (!/^[A-Za-z]{3}, /.test(text)) return undefined;
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now.getTime());
}
