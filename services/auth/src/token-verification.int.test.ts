// @runs-alone: a revoked token refused within 5 s, timed
import { generateKeyPairSync } from 'node:crypto';
import jwt from 'jsonwebtoken';
import {
  BearerGate,
  createJwksKeySource,
  createTokenVerifier,
  revocationSubscription,
  RevocationDenyList,
  TokenBucketLimiter,
  type AuthContext,
  type Clock,
} from '@ofp/auth-tokens';
import { PgLogBus, consumerModule } from '@ofp/bus';
import { singleEnvelope } from '@ofp/contracts';
import { sealedContext, type Module } from '@ofp/runtime';
import { jsonReply, type Route } from '@ofp/http-api';
import { testLogger } from '@ofp/testing';
import type { RegisteredClient } from './tenants.js';
import {
  startAuthTestServer,
  testClock,
  type AuthTestServer,
  type TestClock,
} from './testing/auth-test-server.js';

/** The resource server's JWKS cooldown: short, so that the rotation test waits for it in real time. */
const JWKS_COOLDOWN_MS = 500;

// jest's asymmetric matchers are typed any; as unknown they fit any expected shape.
const anyString: unknown = expect.any(String);

/**
 * The auth service and, in the same app, a resource server that verifies its tokens the way every
 * service does: JWKS over HTTP, the deny-list fed by the `grant.revoked` announcements on the bus.
 */
describe('bearer token verification against the auth service', () => {
  let server: AuthTestServer;
  let client: RegisteredClient;
  let verifierClock: TestClock;
  let revocations: Module;

  function resourceServer(auth: AuthTestServer): Route<AuthContext>[] {
    const logger = testLogger('resource-server');
    const clock: Clock = () => verifierClock();
    const denyList = new RevocationDenyList(clock);
    revocations = consumerModule(
      new PgLogBus(auth.pool, auth.session, auth.store, logger, {
        batchSize: 100,
        pollIntervalMs: 1_000,
      }),
      { name: 'revocations', subscriptions: [revocationSubscription(denyList, 'resource-server')] },
    );
    const verifier = createTokenVerifier({
      issuer: auth.issuer,
      keys: createJwksKeySource({
        url: `${auth.url}/.well-known/jwks.json`,
        logger,
        cooldownMs: JWKS_COOLDOWN_MS,
      }),
      denyList,
      clock,
    });
    const gate = new BearerGate(
      verifier,
      new TokenBucketLimiter({ capacity: 10_000, refillPerSecond: 10_000 }, clock),
    );
    const limited = new BearerGate(
      verifier,
      new TokenBucketLimiter({ capacity: 2, refillPerSecond: 0.1 }, clock),
    );
    const route = (
      method: 'GET' | 'POST',
      path: string,
      access: Route<AuthContext>['access'],
    ): Route<AuthContext> => ({
      method,
      path,
      operationId: `${method} ${path}`,
      summary: 'who is calling',
      description: 'Answers who is calling',
      tag: 'test',
      access,
      responses: { 200: { description: 'the token' } },
      handle: (request) => Promise.resolve(jsonReply(200, singleEnvelope(request.principal))),
    });
    return [
      route('GET', '/v2/things', gate.access(['read'])),
      route('POST', '/v2/things', gate.access(['write'])),
      route('GET', '/v2/limited', limited.access([])),
    ];
  }

  beforeAll(async () => {
    verifierClock = testClock();
    server = await startAuthTestServer({ routes: resourceServer });
    await revocations.start();
    client = await server.registerClient();
  });
  afterAll(async () => {
    await revocations.stop();
    await server.close();
  });

  async function accessToken(scope = 'read write'): Promise<string> {
    const response = await server.postForm('/oauth/token', {
      grant_type: 'client_credentials',
      scope,
      client_id: client.client_id,
      client_secret: client.client_secret,
    });
    return ((await response.json()) as { access_token: string }).access_token;
  }

  const call = (token: string | undefined, method = 'GET', path = '/v2/things') =>
    fetch(`${server.url}${path}`, {
      method,
      headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
    });

  async function expectRefused(token: string, description: string): Promise<void> {
    const response = await call(token);
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe(
      `Bearer error="invalid_token", error_description="${description}"`,
    );
    expect(await response.json()).toEqual({ count: 0, results: null, errors: { base: [description] } });
  }

  /** The service's signing key, read from its table, to forge tokens the signature check would pass. */
  async function signingKey(): Promise<{ kid: string; privateKey: string }> {
    const { rows } = await server.pool.query<{ kid: string; private_key: string }>(
      'SELECT kid, private_key FROM auth.signing_keys WHERE retired_at IS NULL',
    );
    const { kid, private_key } = rows[0]!;
    return { kid, privateKey: server.secrets.open(private_key, sealedContext('auth.signing_keys', [kid])) };
  }

  function claimsOf(token: string): Record<string, unknown> {
    return jwt.decode(token) as Record<string, unknown>;
  }

  /** A token signed as the service signs them (RFC 9068 header), with `key` named `kid`. */
  function forge(claims: object, key: jwt.Secret, kid: string, typ = 'at+jwt'): string {
    return jwt.sign(claims, key, { algorithm: 'RS256', keyid: kid, header: { alg: 'RS256', typ } });
  }

  it('accepts a valid token and tells the route who is calling', async () => {
    const response = await call(await accessToken());
    expect(response.status).toBe(200);
    expect(((await response.json()) as { results: unknown }).results).toMatchObject({
      clientId: client.client_id,
      orgId: client.organization_id,
      scopes: ['read', 'write'],
      tokenId: anyString,
    });
  });

  it('challenges a request without a token, without an error code', async () => {
    const response = await call(undefined);
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toBe('Bearer');
  });

  it('refuses a token with a forged signature', async () => {
    const [header, payload] = (await accessToken()).split('.');
    await expectRefused(`${header}.${payload}.${'A'.repeat(342)}`, 'The access token signature is invalid');
  });

  it('refuses an unsigned token (alg none)', async () => {
    const payload = Buffer.from(JSON.stringify(claimsOf(await accessToken()))).toString('base64url');
    const { kid } = await signingKey();
    const header = Buffer.from(JSON.stringify({ alg: 'none', typ: 'at+jwt', kid })).toString('base64url');
    await expectRefused(`${header}.${payload}.`, 'The access token is not signed with RS256');
  });

  it('refuses an expired token', async () => {
    const token = await accessToken();
    verifierClock.advance(10_800_000 + 60_000);
    try {
      await expectRefused(token, 'The access token expired');
    } finally {
      verifierClock.advance(-(10_800_000 + 60_000));
    }
  });

  it('refuses a token signed by a key the service does not publish', async () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const forged = forge(claimsOf(await accessToken()), privateKey, 'other-key');
    await expectRefused(forged, 'The access token is signed with an unknown key');
    const { kid } = await signingKey();
    const impostor = forge(claimsOf(await accessToken()), privateKey, kid);
    await expectRefused(impostor, 'The access token signature is invalid');
  });

  it('refuses a token of another issuer, even signed with the right key', async () => {
    const { kid, privateKey } = await signingKey();
    const claims = { ...claimsOf(await accessToken()), iss: 'https://elsewhere.example' };
    await expectRefused(forge(claims, privateKey, kid), 'The access token has another issuer');
  });

  it('refuses a JWT of the right key that is not typed at+jwt (RFC 9068 §4)', async () => {
    const { kid, privateKey } = await signingKey();
    await expectRefused(
      forge(claimsOf(await accessToken()), privateKey, kid, 'JWT'),
      'The token is not an access token (typ at+jwt)',
    );
  });

  it('refuses a token of the right key meant for another audience', async () => {
    const { kid, privateKey } = await signingKey();
    const claims = { ...claimsOf(await accessToken()), aud: 'https://other-resource.example' };
    await expectRefused(forge(claims, privateKey, kid), 'The access token is meant for another audience');
  });

  it('answers a read-only token on a write route with 403 insufficient_scope', async () => {
    const token = await accessToken('read');
    expect((await call(token)).status).toBe(200);
    const response = await call(token, 'POST');
    expect(response.status).toBe(403);
    expect(response.headers.get('www-authenticate')).toBe(
      'Bearer error="insufficient_scope", error_description="The access token lacks the write scope", scope="write"',
    );
  });

  it('refuses a revoked token within 5 seconds', async () => {
    const token = await accessToken();
    expect((await call(token)).status).toBe(200);
    const revoked = await server.postForm('/oauth/revoke', {
      token,
      client_id: client.client_id,
      client_secret: client.client_secret,
    });
    expect(revoked.status).toBe(200);
    const start = Date.now();
    let status = 200;
    while (status === 200 && Date.now() - start < 5_000) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      status = (await call(token)).status;
    }
    expect(status).toBe(401);
    expect(Date.now() - start).toBeLessThan(5_000);
    await expectRefused(token, 'The access token was revoked');
  });

  it('refuses every token of a disabled client within 5 seconds', async () => {
    const tokens = [await accessToken(), await accessToken('read')];
    for (const token of tokens) expect((await call(token)).status).toBe(200);
    const disabled = await fetch(`${server.url}/admin/clients/${client.client_id}/disable`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(disabled.status).toBe(200);
    const start = Date.now();
    const statuses = async () => Promise.all(tokens.map(async (token) => (await call(token)).status));
    while ((await statuses()).includes(200) && Date.now() - start < 5_000) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(await statuses()).toEqual([401, 401]);
    expect(Date.now() - start).toBeLessThan(5_000);
    client = await server.registerClient();
  });

  it('limits each client’s request rate with 429 and the RateLimit headers', async () => {
    const token = await accessToken();
    const first = await call(token, 'GET', '/v2/limited');
    expect(first.status).toBe(200);
    expect(first.headers.get('ratelimit-limit')).toBe('2');
    expect(first.headers.get('ratelimit-remaining')).toBe('1');
    expect((await call(token, 'GET', '/v2/limited')).status).toBe(200);
    const limited = await call(token, 'GET', '/v2/limited');
    expect(limited.status).toBe(429);
    expect(limited.headers.get('retry-after')).toBe('10');
    expect(limited.headers.get('ratelimit-remaining')).toBe('0');
    expect(limited.headers.get('ratelimit-reset')).toBe('20');
    expect(await limited.json()).toEqual({
      count: 0,
      results: null,
      errors: { base: ['Too many requests'] },
    });
  });
  // The last tests rotate the signing key and move the service's clock.
  it('keeps tokens of a rotated-out key valid and accepts the new key’s tokens', async () => {
    const before = await accessToken();
    const rotation = await fetch(`${server.url}/admin/signing_keys/rotate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(rotation.status).toBe(201);
    const after = await accessToken();
    const kidOf = (token: string) => jwt.decode(token, { complete: true })!.header.kid;
    expect(kidOf(after)).not.toBe(kidOf(before));
    // The verifier may have fetched the JWKS within its cooldown: it looks for a new key once that passed.
    await new Promise((resolve) => setTimeout(resolve, JWKS_COOLDOWN_MS));
    expect((await call(after)).status).toBe(200);
    expect((await call(before)).status).toBe(200);
  });

  it('stops publishing a retired key once its last token expired', async () => {
    const before = await accessToken();
    await fetch(`${server.url}/admin/signing_keys/rotate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
      body: '{}',
    });
    const kid = jwt.decode(before, { complete: true })!.header.kid;
    const published = async () =>
      (
        (await (await fetch(`${server.url}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] }
      ).keys.map((k) => k.kid);
    expect(await published()).toContain(kid);
    server.clock.advance(10_800_000 + 5 * 60_000 + 1_000);
    expect(await published()).not.toContain(kid);
  });
});
