import { createLocalJWKSet, createRemoteJWKSet, errors, type JWTVerifyGetKey } from 'jose';
import type { Logger } from '@ofp/runtime';

/**
 * Where a verifier finds the public key a token's header names (`kid`, `alg`): jose's key resolver. It
 * rejects with jose's `JWKSNoMatchingKey` when the issuer does not publish the key, and with
 * {@link KeySourceUnavailableError} when the key is unknown and the keys could not be fetched, so that an
 * outage of the issuer is not mistaken for a bad token.
 */
export type KeySource = JWTVerifyGetKey;

export class KeySourceUnavailableError extends Error {
  override readonly name = 'KeySourceUnavailableError';
}

export interface JwksKeySourceOptions {
  /** The issuer's JWKS document, e.g. `http://auth:8080/.well-known/jwks.json`. */
  url: string;
  logger: Logger;
  /**
   * Known keys are refetched once they are this old, so that keys the issuer stopped publishing stop
   * verifying (default 10 minutes).
   */
  maxAgeMs?: number;
  /**
   * An unknown `kid` triggers a refetch at most once per this interval (default 5 s): a flood of tokens
   * with made-up key ids costs the issuer one request per interval, and a key the issuer just started
   * signing with is picked up within it. An unreachable issuer is asked again once per interval too.
   */
  cooldownMs?: number;
  /** Per request (default 5 s). */
  timeoutMs?: number;
}

/** Errors of a JWKS that answered: the token names a key it does not hold (once, or ambiguously). */
function isAboutTheToken(error: unknown): boolean {
  return error instanceof errors.JWKSNoMatchingKey || error instanceof errors.JWKSMultipleMatchingKeys;
}

/**
 * Public keys from a JWKS endpoint (RFC 7517 §5), fetched and cached by jose's `createRemoteJWKSet`
 * (concurrent misses share one request; only keys usable for the token's `alg` and for signatures
 * match). While the issuer cannot be reached, the keys it published last keep verifying, and it is
 * asked again once per cooldown rather than once per request.
 */
export interface JwksKeySource extends KeySource {
  /**
   * Fetches the keys now, so that the first tokens after a start do not wait for them: resolves with
   * how many the issuer publishes, rejects when it could not be asked or did not answer.
   */
  load(): Promise<number>;
}

export function createJwksKeySource(options: JwksKeySourceOptions): JwksKeySource {
  const cooldownMs = options.cooldownMs ?? 5_000;
  const remote = createRemoteJWKSet(new URL(options.url), {
    cacheMaxAge: options.maxAgeMs ?? 10 * 60_000,
    cooldownDuration: cooldownMs,
    timeoutDuration: options.timeoutMs ?? 5_000,
  });
  let failedAt = -Infinity; // performance.now() of the last failed fetch: monotonic, unlike jose's clock
  let lastKnown: JWTVerifyGetKey | undefined; // the keys of the last fetch, while fetching fails

  const unavailable = () => new KeySourceUnavailableError(`signing keys unavailable from ${options.url}`);

  async function fromLastKnown(...args: Parameters<JWTVerifyGetKey>) {
    const jwks = remote.jwks();
    if (jwks === undefined) throw unavailable();
    lastKnown ??= createLocalJWKSet(jwks);
    try {
      return await lastKnown(...args);
    } catch (error) {
      // Not among the keys seen last: perhaps one the issuer published since, so not the token's fault.
      if (error instanceof errors.JWKSNoMatchingKey) throw unavailable();
      throw error;
    }
  }

  const keySource: KeySource = async (...args) => {
    if (performance.now() - failedAt < cooldownMs) return fromLastKnown(...args);
    try {
      const key = await remote(...args);
      lastKnown = undefined;
      return key;
    } catch (error) {
      if (isAboutTheToken(error)) throw error;
      failedAt = performance.now();
      options.logger.warn({ err: error, url: options.url }, 'fetching the JWKS failed');
      return fromLastKnown(...args);
    }
  };
  return Object.assign(keySource, {
    async load() {
      await remote.reload();
      return remote.jwks()?.keys.length ?? 0;
    },
  });
}
