import { generateKeyPairSync } from 'node:crypto';
import { createLogger } from '@ofp/runtime';
import { createJwksKeySource, KeySourceUnavailableError } from './jwks.js';

const logger = createLogger({ name: 'test', level: 'silent' });

function jwk(kid: string): object {
  const { publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { ...publicKey.export({ format: 'jwk' }), kid, use: 'sig', alg: 'RS256' };
}

describe('createJwksKeySource', () => {
  const k1 = jwk('k1');
  const k2 = jwk('k2');
  let now: number;
  let published: object[];
  let requests: number;
  let failing: boolean;
  const fakeFetch = (async () => {
    requests++;
    if (failing) throw new Error('connection refused');
    return Response.json({ keys: published });
  }) as typeof fetch;
  const source = () =>
    createJwksKeySource({
      url: 'http://auth.test/.well-known/jwks.json',
      clock: () => new Date(now),
      logger,
      fetch: fakeFetch,
      refetchIntervalMs: 5_000,
      maxAgeMs: 600_000,
    });

  beforeEach(() => {
    now = 0;
    published = [k1];
    requests = 0;
    failing = false;
  });

  it('fetches once and serves known keys from the cache', async () => {
    const keys = source();
    expect(await keys.getKey('k1')).toBeDefined();
    expect(await keys.getKey('k1')).toBeDefined();
    expect(requests).toBe(1);
  });

  it('refetches on an unknown kid, at most once per interval', async () => {
    const keys = source();
    await keys.getKey('k1');
    expect(await keys.getKey('bogus')).toBeUndefined();
    expect(requests).toBe(1);
    now = 5_000;
    expect(await keys.getKey('bogus')).toBeUndefined();
    expect(requests).toBe(2);
    for (let i = 0; i < 100; i++) await keys.getKey(`bogus-${i}`);
    expect(requests).toBe(2);
    published = [k1, k2];
    now = 10_000;
    expect(await keys.getKey('k2')).toBeDefined();
    expect(requests).toBe(3);
  });

  it('shares one request between concurrent misses', async () => {
    const keys = source();
    await Promise.all([keys.getKey('k1'), keys.getKey('k1'), keys.getKey('x')]);
    expect(requests).toBe(1);
  });

  it('drops keys the issuer no longer publishes once the cache is old', async () => {
    const keys = source();
    await keys.getKey('k1');
    published = [k2];
    now = 600_000;
    expect(await keys.getKey('k1')).toBeUndefined();
  });

  it('keeps serving cached keys while the issuer is unreachable', async () => {
    const keys = source();
    await keys.getKey('k1');
    failing = true;
    now = 600_000;
    expect(await keys.getKey('k1')).toBeDefined();
  });

  it('refetches after the clock stepped back instead of waiting for it to catch up', async () => {
    const keys = source();
    now = 3_600_000;
    await keys.getKey('k1');
    now = 0;
    published = [k1, k2];
    expect(await keys.getKey('k2')).toBeDefined();
  });

  it('reports an unreachable issuer instead of an unknown key', async () => {
    failing = true;
    await expect(source().getKey('k1')).rejects.toBeInstanceOf(KeySourceUnavailableError);
  });

  it('ignores keys that are not RS256 signing keys', async () => {
    published = [
      { ...k1, use: 'enc' },
      { ...k2, alg: 'PS256' },
      { kty: 'oct', k: 'c2VjcmV0', kid: 'k3' },
    ];
    const keys = source();
    expect(await keys.getKey('k1')).toBeUndefined();
    expect(await keys.getKey('k2')).toBeUndefined();
    expect(await keys.getKey('k3')).toBeUndefined();
  });
});
