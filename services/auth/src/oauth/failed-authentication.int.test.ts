import type { RegisteredClient } from '../tenants.js';
import { startAuthTestServer, type AuthTestServer } from '../testing/auth-test-server.js';

/**
 * API.md §12: failed client authentication at /oauth/token is limited per source address and per
 * client_id (429 with Retry-After, in RFC 6749 §5.2's format), and the real client's correct secret
 * is not locked out. The source address is set through X-Forwarded-For (one trusted proxy).
 */
describe('limits on failed client authentication', () => {
  let server: AuthTestServer;
  let client: RegisteredClient;
  const ATTACKER = '203.0.113.7';
  const ELSEWHERE = '198.51.100.20';

  beforeAll(async () => {
    server = await startAuthTestServer({
      failedAuthentication: { capacity: 5, refillPerSecond: 5 / 60 },
      trustedProxyHops: 1,
    });
    client = await server.registerClient();
  });
  afterAll(() => server.close());

  const token = (from: string, secret: string, clientId = client.client_id) =>
    server.postForm(
      '/oauth/token',
      { grant_type: 'client_credentials', client_id: clientId, client_secret: secret },
      { 'x-forwarded-for': `10.0.0.1, ${from}` },
    );

  it('answers 401 within the limit, then 429 with Retry-After and RateLimit-*, and still admits the right secret', async () => {
    // The real client has authenticated from this address before: it is familiar there.
    expect((await token(ATTACKER, client.client_secret)).status).toBe(200);
    const statuses = [];
    for (let i = 0; i < 8; i++) statuses.push((await token(ATTACKER, `guess-${i}`)).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429, 429]);

    const limited = await token(ATTACKER, 'one-more-guess');
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // API.md §3: a 429 carries RateLimit-* too, here those of the failure limit (5 a minute).
    expect(limited.headers.get('ratelimit-limit')).toBe('5');
    expect(limited.headers.get('ratelimit-remaining')).toBe('0');
    expect(Number(limited.headers.get('ratelimit-reset'))).toBeGreaterThanOrEqual(
      Number(limited.headers.get('retry-after')),
    );
    expect(limited.headers.get('cache-control')).toBe('no-store');
    expect(await limited.json()).toEqual({
      error: 'slow_down',
      error_description: 'Too many failed client authentications; try again later',
    });

    expect((await token(ATTACKER, client.client_secret)).status).toBe(200);
  });

  it('checks nothing more from an address over its limit for clients unfamiliar there', async () => {
    const other = await server.registerClient();
    const response = await token(ATTACKER, other.client_secret, other.client_id);
    expect(response.status).toBe(429);
    expect((await token(ELSEWHERE, other.client_secret, other.client_id)).status).toBe(200);
  });

  it('lets the right secret in from anywhere while its client_id is over its limit', async () => {
    // The client's failure budget was spent by the guesses above; a new address has a budget of its own.
    expect((await token(ELSEWHERE, client.client_secret)).status).toBe(200);
    const wrong = await token(ELSEWHERE, 'guess-from-elsewhere');
    expect(wrong.status).toBe(429);
    expect((await token(ELSEWHERE, client.client_secret)).status).toBe(200);
  });

  it('refills as time passes', async () => {
    server.clock.advance(60_000);
    const address = '192.0.2.99';
    expect((await token(address, 'after-a-minute')).status).toBe(401);
  });
});
