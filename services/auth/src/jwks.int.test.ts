import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import {
  authMetrics,
  createJwksKeySource,
  createTokenVerifier,
  KeySourceUnavailableError,
  RevocationDenyList,
  TokenRejectedError,
  verifyBearer,
  type TokenVerifier,
} from '@ofp/auth-tokens';
import { DomainError } from '@ofp/contracts';
import { closeServer } from '@ofp/http-api';
import { testLogger } from '@ofp/testing';
import type { RegisteredClient } from './tenants.js';
import { startAuthTestServer, type AuthTestServer } from './testing/auth-test-server.js';

// Long enough for a loaded machine to do a test's steps within one, short enough to wait for.
const COOLDOWN_MS = 2_000;
const MAX_AGE_MS = 3_000;

interface Jwks {
  keys: { kid: string; use?: string }[];
}

/**
 * The auth service's JWKS endpoint behind a pass-through proxy over real HTTP, which counts the requests
 * that reach it and can withhold keys or drop every connection (an issuer that cannot be reached).
 */
interface JwksProxy {
  url: string;
  requests: number;
  down: boolean;
  transform: (jwks: Jwks) => Jwks;
  close(): Promise<void>;
}

async function startJwksProxy(target: string): Promise<JwksProxy> {
  const server = createServer((request, response) => {
    proxy.requests++;
    if (proxy.down) {
      request.socket.destroy();
      return;
    }
    void fetch(target)
      .then(async (answer) => proxy.transform((await answer.json()) as Jwks))
      .then((jwks) =>
        response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jwks)),
      );
  });
  const proxy: JwksProxy = {
    url: '',
    requests: 0,
    down: false,
    transform: (jwks) => jwks,
    close: () => closeServer(server),
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`;
  return proxy;
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * The JWKS key source every service verifies tokens with (jose's remote JWK set), against the auth
 * service over real HTTP and with real time: the cooldown and the cache's age are short instead of a
 * clock moved by hand.
 */
describe('JWKS key source against the auth service', () => {
  let server: AuthTestServer;
  let client: RegisteredClient;
  let proxy: JwksProxy;
  let verifier: TokenVerifier;
  const logger = testLogger('jwks');

  beforeAll(async () => {
    server = await startAuthTestServer();
    client = await server.registerClient();
  });
  afterAll(async () => {
    await server.close();
  });
  beforeEach(async () => {
    proxy = await startJwksProxy(`${server.url}/.well-known/jwks.json`);
    const clock = () => new Date();
    verifier = createTokenVerifier({
      issuer: server.issuer,
      keys: createJwksKeySource({ url: proxy.url, logger, cooldownMs: COOLDOWN_MS, maxAgeMs: MAX_AGE_MS }),
      denyList: new RevocationDenyList(clock),
      clock,
    });
  });
  afterEach(async () => {
    await proxy.close();
  });

  /** A new access token (client credentials), so never one the verifier remembers. */
  async function accessToken(): Promise<string> {
    const response = await server.postForm('/oauth/token', {
      grant_type: 'client_credentials',
      client_id: client.client_id,
      client_secret: client.client_secret,
    });
    return ((await response.json()) as { access_token: string }).access_token;
  }

  const kidOf = (token: string): string =>
    (JSON.parse(Buffer.from(token.split('.')[0]!, 'base64url').toString()) as { kid: string }).kid;

  /** `token` with another `kid` in its header (its signature no longer matters: the key is looked up first). */
  function withKid(token: string, kid: string): string {
    const [header, payload, signature] = token.split('.');
    const named = { ...(JSON.parse(Buffer.from(header!, 'base64url').toString()) as object), kid };
    return `${Buffer.from(JSON.stringify(named)).toString('base64url')}.${payload}.${signature}`;
  }

  async function reasonRefused(token: string): Promise<string> {
    const error: unknown = await verifier.verify(token).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TokenRejectedError);
    return (error as TokenRejectedError).reason;
  }

  async function rotate(): Promise<void> {
    const rotation = await fetch(`${server.url}/admin/signing_keys/rotate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(rotation.status).toBe(201);
  }

  it('fetches the keys once and verifies every token with them', async () => {
    const tokens = [await accessToken(), await accessToken(), await accessToken()];
    await Promise.all(tokens.map((token) => verifier.verify(token)));
    await verifier.verify(await accessToken());
    expect(proxy.requests).toBe(1);
  });

  it('refetches for an unknown kid at most once per cooldown, and so picks up a rotated key', async () => {
    const token = await accessToken();
    await verifier.verify(token);
    // Made-up key ids within the cooldown of that fetch cost the issuer nothing.
    for (let i = 0; i < 20; i++)
      expect(await reasonRefused(withKid(token, `made-up-${i}`))).toBe('unknown_key');
    expect(proxy.requests).toBe(1);
    await rotate();
    const rotated = await accessToken();
    expect(kidOf(rotated)).not.toBe(kidOf(token));
    await pause(COOLDOWN_MS);
    await expect(verifier.verify(rotated)).resolves.toMatchObject({ clientId: client.client_id });
    expect(proxy.requests).toBe(2);
    for (let i = 0; i < 20; i++) await reasonRefused(withKid(rotated, `made-up-again-${i}`));
    expect(proxy.requests).toBe(2);
    await verifier.verify(token);
  });

  it('stops verifying with a key the issuer no longer publishes once the cached keys are old', async () => {
    const kid = kidOf(await accessToken());
    await verifier.verify(await accessToken());
    proxy.transform = (jwks) => ({ keys: jwks.keys.filter((key) => key.kid !== kid) });
    await verifier.verify(await accessToken());
    await pause(MAX_AGE_MS);
    expect(await reasonRefused(await accessToken())).toBe('unknown_key');
    expect(proxy.requests).toBe(2);
  });

  it('keeps verifying with the keys it has while the issuer is unreachable, asking once per cooldown', async () => {
    await verifier.verify(await accessToken());
    proxy.down = true;
    await pause(MAX_AGE_MS);
    await verifier.verify(await accessToken());
    expect(proxy.requests).toBe(2);
    await verifier.verify(await accessToken());
    // A key it never saw may be one the issuer published since: unavailable, not a bad token.
    await expect(verifier.verify(withKid(await accessToken(), 'unseen'))).rejects.toBeInstanceOf(
      KeySourceUnavailableError,
    );
    expect(proxy.requests).toBe(2);
    await pause(COOLDOWN_MS);
    await verifier.verify(await accessToken());
    expect(proxy.requests).toBe(3);
    proxy.down = false;
    await pause(COOLDOWN_MS);
    await verifier.verify(await accessToken());
    expect(proxy.requests).toBe(4);
    await verifier.verify(await accessToken());
    expect(proxy.requests).toBe(4);
  });

  it('answers 503 when the issuer cannot be reached for keys it never had, and counts it', async () => {
    proxy.down = true;
    const registry = new Registry();
    const metrics = authMetrics(registry);
    const error: unknown = await verifyBearer(verifier, `Bearer ${await accessToken()}`, metrics).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(DomainError);
    expect(error).toMatchObject({
      kind: 'Unavailable',
      errors: { base: ['Access tokens cannot be verified right now'] },
    });
    const failures = await registry.getSingleMetric('auth_token_verification_failures_total')!.get();
    expect(failures.values.find((v) => v.labels.reason === 'unavailable')?.value).toBe(1);
  });

  it('uses only the keys published for signatures', async () => {
    proxy.transform = (jwks) => ({ keys: jwks.keys.map((key) => ({ ...key, use: 'enc' })) });
    expect(await reasonRefused(await accessToken())).toBe('unknown_key');
  });
});
