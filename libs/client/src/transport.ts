import { randomUUID } from 'node:crypto';
import type { TokenSource } from './tokens.js';

/** How the client retries. */
export interface RetryOptions {
  /** Tries in all, the first included (4: three retries). 1 turns retrying off. */
  readonly maxAttempts?: number;
  /** The first wait without a `Retry-After`; each next one doubles, with full jitter. */
  readonly baseDelayMs?: number;
  /**
   * The longest wait before a retry: a `Retry-After` beyond it is not waited for, and the response
   * is the answer (a `PlatformError` with `retryAfterSeconds`).
   */
  readonly maxDelayMs?: number;
}

const DEFAULTS: Required<RetryOptions> = { maxAttempts: 4, baseDelayMs: 500, maxDelayMs: 30_000 };

/**
 * Statuses that say "later", not "no": rate limited (429), not ready or a dependency down (503, API.md
 * §3), and a proxy in front of the platform that could not reach it (502, 504).
 */
const RETRIED = new Set([429, 502, 503, 504]);

export interface TransportOptions {
  readonly tokens?: TokenSource;
  readonly retry?: RetryOptions;
  /** The fetch that sends each try (the global one when left out). */
  readonly fetch?: (request: Request) => Promise<Response>;
  /** Waits between tries (tests shorten it). */
  readonly sleep?: (ms: number) => Promise<void>;
  /** Jitter's randomness, in [0, 1). */
  readonly random?: () => number;
}

/**
 * A fetch for the platform's API: it sends the bearer token (a new one when the platform says the
 * token expired or was revoked, once), gives every write an `Idempotency-Key` unless it has one (the
 * same on every try, so that a retried write happens once: API.md §5), and tries again after network
 * errors and after 429, 502, 503 and 504, waiting what `Retry-After` says, else an exponential backoff
 * with full jitter.
 */
export function platformFetch(options: TransportOptions = {}): (request: Request) => Promise<Response> {
  const retry = { ...DEFAULTS, ...options.retry };
  const send = options.fetch ?? ((request: Request) => fetch(request));
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const random = options.random ?? Math.random;
  const backoff = (attempt: number) =>
    Math.min(retry.maxDelayMs, retry.baseDelayMs * 2 ** (attempt - 1)) * random();
  return async (request) => {
    const headers = new Headers(request.headers);
    if (request.method !== 'GET' && request.method !== 'HEAD' && !headers.has('idempotency-key'))
      headers.set('Idempotency-Key', randomUUID());
    // Read once, sent again on every try.
    const body = request.body === null ? undefined : await request.arrayBuffer();
    let renewedToken = false;
    for (let attempt = 1; ; attempt++) {
      const token = await options.tokens?.accessToken();
      if (token !== undefined) headers.set('Authorization', `Bearer ${token}`);
      let response: Response;
      try {
        response = await send(
          new Request(request.url, {
            method: request.method,
            headers,
            signal: request.signal,
            ...(body === undefined ? {} : { body }),
          }),
        );
      } catch (error) {
        // No answer (refused, reset, DNS): a write with its key is safe to send again.
        if (request.signal.aborted || attempt >= retry.maxAttempts) throw error;
        await sleep(backoff(attempt));
        continue;
      }
      if (response.status === 401 && token !== undefined && !renewedToken && invalidToken(response)) {
        // Expired or revoked (API.md §3, RFC 6750): one new token, a try that does not count.
        renewedToken = true;
        options.tokens?.invalidate(token);
        await response.body?.cancel();
        attempt -= 1;
        continue;
      }
      if (RETRIED.has(response.status) && attempt < retry.maxAttempts) {
        const wait = retryAfterMs(response) ?? backoff(attempt);
        if (wait <= retry.maxDelayMs) {
          await response.body?.cancel();
          await sleep(wait);
          continue;
        }
      }
      return response;
    }
  };
}

/** RFC 6750 §3: the challenge of a token the platform no longer takes. */
function invalidToken(response: Response): boolean {
  return /error="invalid_token"/.test(response.headers.get('www-authenticate') ?? '');
}

/** `Retry-After` in milliseconds (seconds, or an HTTP date: RFC 9110 §10.2.3). */
function retryAfterMs(response: Response): number | undefined {
  const value = response.headers.get('retry-after');
  if (value === null) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}
