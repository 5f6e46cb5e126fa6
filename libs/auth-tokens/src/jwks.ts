import { createPublicKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import type { Logger } from '@ofp/runtime';
import type { Clock } from './clock.js';

/** Where a verifier finds the public key a token names in its `kid` header. */
export interface KeySource {
  /**
   * The RS256 public key with this key id, or undefined when the issuer does not publish it.
   * Throws {@link KeySourceUnavailableError} when the key is unknown and the keys could not be fetched,
   * so that an outage of the issuer is not mistaken for a bad token.
   */
  getKey(kid: string): Promise<KeyObject | undefined>;
}

export class KeySourceUnavailableError extends Error {
  override readonly name = 'KeySourceUnavailableError';
}

export interface JwksKeySourceOptions {
  /** The issuer's JWKS document, e.g. `http://auth:8080/.well-known/jwks.json`. */
  url: string;
  clock: Clock;
  logger: Logger;
  fetch?: typeof fetch;
  /**
   * Known keys are refetched once they are this old, so that keys the issuer retired stop verifying
   * (default 10 minutes).
   */
  maxAgeMs?: number;
  /**
   * An unknown `kid` triggers a refetch at most once per this interval (default 5 s): a flood of tokens
   * with made-up key ids costs the issuer one request per interval, and a key the issuer just started
   * signing with is picked up within it.
   */
  refetchIntervalMs?: number;
  /** Per request (default 5 s). */
  timeoutMs?: number;
}

/**
 * Public keys from a JWKS endpoint (RFC 7517 §5), cached in memory. Only RSA signing keys usable with
 * RS256 are kept. Concurrent misses share one request.
 */
export function createJwksKeySource(options: JwksKeySourceOptions): KeySource {
  const fetchJwks = options.fetch ?? fetch;
  const maxAgeMs = options.maxAgeMs ?? 10 * 60_000;
  const refetchIntervalMs = options.refetchIntervalMs ?? 5_000;
  const timeoutMs = options.timeoutMs ?? 5_000;

  let keys = new Map<string, KeyObject>();
  let fetchedAt: number | undefined; // last successful fetch
  let attemptedAt: number | undefined; // last attempt, successful or not
  let lastFailed = false;
  let inFlight: Promise<void> | undefined;

  async function refresh(): Promise<void> {
    attemptedAt = options.clock().getTime();
    try {
      const response = await fetchJwks(options.url, {
        headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(timeoutMs),
      });
      if (!response.ok) throw new Error(`JWKS request answered ${response.status}`);
      keys = parseJwks(await response.json(), options.logger);
      fetchedAt = options.clock().getTime();
      lastFailed = false;
    } catch (error) {
      lastFailed = true;
      options.logger.warn({ err: error, url: options.url }, 'fetching the JWKS failed');
    }
  }

  function refreshOnce(): Promise<void> {
    inFlight ??= refresh().finally(() => {
      inFlight = undefined;
    });
    return inFlight;
  }

  return {
    async getKey(kid) {
      const now = options.clock().getTime();
      // A clock that stepped back (NTP) counts as long ago rather than freezing the cache.
      const since = (at: number | undefined) => (at === undefined || at > now ? Infinity : now - at);
      const stale = since(fetchedAt) >= maxAgeMs;
      // Also after a failed attempt: an unreachable issuer is retried once per interval, not per request.
      const mayFetch = since(attemptedAt) >= refetchIntervalMs;
      if (inFlight) await inFlight;
      else if ((stale || !keys.has(kid)) && mayFetch) await refreshOnce();
      const key = keys.get(kid);
      if (key === undefined && lastFailed) {
        throw new KeySourceUnavailableError(`signing keys unavailable from ${options.url}`);
      }
      return key;
    },
  };
}

function parseJwks(body: unknown, logger: Logger): Map<string, KeyObject> {
  const list = (body as { keys?: unknown } | null)?.keys;
  if (!Array.isArray(list)) throw new Error('JWKS document has no "keys" array');
  const keys = new Map<string, KeyObject>();
  for (const entry of list as unknown[]) {
    const jwk = entry as JsonWebKey & { kid?: unknown; use?: unknown; alg?: unknown };
    // RFC 7517 §4: only RSA keys meant for signatures with RS256 (or unstated use/alg) qualify.
    if (typeof jwk.kid !== 'string' || jwk.kty !== 'RSA') continue;
    if (typeof jwk.n !== 'string' || typeof jwk.e !== 'string') continue;
    if (jwk.use !== undefined && jwk.use !== 'sig') continue;
    if (jwk.alg !== undefined && jwk.alg !== 'RS256') continue;
    try {
      keys.set(jwk.kid, createPublicKey({ key: { kty: 'RSA', n: jwk.n, e: jwk.e }, format: 'jwk' }));
    } catch (error) {
      logger.warn({ err: error, kid: jwk.kid }, 'skipping an unusable JWK');
    }
  }
  return keys;
}
