import type { RequestListener, Server } from 'node:http';
import type { TokenBucketConfig } from '@ofp/auth-tokens';
import { EventStore, migrateEventStore } from '@ofp/event-store';
import { createMetricsRegistry, type Pool, type PostgresSession, type SecretsKeyring } from '@ofp/runtime';
import { closeServer, createHttpApp, listen, type Route } from '@ofp/http-api';
import { createTestDatabase, testLogger, testSecrets, type TestDatabase } from '@ofp/testing';
import { createAuthService, migrateAuth, type AuthService } from '../module.js';
import type { RegisteredClient } from '../tenants.js';

/** A clock that tests move by hand. */
export interface TestClock {
  (): Date;
  advance(ms: number): void;
}

export function testClock(start = Date.now()): TestClock {
  let now = start;
  return Object.assign(() => new Date(now), {
    advance(ms: number) {
      now += ms;
    },
  });
}

export interface AuthTestServer {
  /** The base URL, also the issuer. */
  url: string;
  issuer: string;
  adminToken: string;
  pool: Pool;
  /** A session on the test database (its LISTEN), and the event store revocations are announced in. */
  session: PostgresSession;
  store: EventStore;
  clock: TestClock;
  /** The key-encryption keys that seal its signing keys. */
  secrets: SecretsKeyring;
  auth: AuthService;
  /** Registers an organization and a client through the admin API. */
  registerClient(client?: {
    scopes?: string[];
    redirectUri?: string;
    /** RFC 9449 §5.2: tokens only with a DPoP proof. */
    dpopBoundAccessTokens?: boolean;
  }): Promise<RegisteredClient>;
  /**
   * Runs the authorization code flow for a client registered with {@link TEST_REDIRECT_URI}: resolves
   * with the token response (a grant, its refresh token) and the code.
   */
  codeGrant(client: {
    client_id: string;
    client_secret: string;
  }): Promise<{ access_token: string; refresh_token: string; code: string }>;
  /** POSTs a form to the server, as an OAuth client does. */
  postForm(path: string, form: Record<string, string>, headers?: Record<string, string>): Promise<Response>;
  close(): Promise<void>;
}

export const TEST_REDIRECT_URI = 'http://127.0.0.1:9/callback';

/**
 * The auth service on a database of its own, listening on a free loopback port. `routes` adds routes
 * to the same app (a resource server guarded by the verifier, say).
 */
export async function startAuthTestServer(
  options: {
    rateLimit?: TokenBucketConfig;
    failedAuthentication?: TokenBucketConfig;
    /** Proxies in front whose X-Forwarded-For is believed (a test sets the source address through it). */
    trustedProxyHops?: number;
    routes?: (server: AuthTestServer) => Route[];
    /** The key-encryption keys (default: fresh ones). */
    secrets?: SecretsKeyring;
    /** DPoP proofs must carry a server nonce made with this secret (RFC 9449 §8-9). */
    dpopNonceSecret?: string;
  } = {},
): Promise<AuthTestServer> {
  const logger = testLogger('auth-test');
  const database: TestDatabase = await createTestDatabase();
  await migrateAuth(database.pool, logger);
  await migrateEventStore(database.pool, logger);
  const store = new EventStore(database.pool, { outbox: false });
  // The issuer is the listening URL, known only once listening: the app is made afterwards.
  let app: RequestListener = (_req, res) => void res.writeHead(503).end();
  const listening: { server: Server; port: number } = await listen(
    (req, res) => app(req, res),
    0,
    '127.0.0.1',
  );
  const url = `http://127.0.0.1:${listening.port}`;
  const clock = testClock();
  const adminToken = 'test-admin-token-0123456789';
  const secrets = options.secrets ?? testSecrets();
  const auth = createAuthService({
    pool: database.pool,
    store,
    logger,
    clock,
    settings: {
      publicUrl: url,
      adminToken,
      rateLimit: options.rateLimit ?? { capacity: 10_000, refillPerSecond: 10_000 },
      failedAuthentication: options.failedAuthentication ?? { capacity: 1_000, refillPerSecond: 1_000 },
      refreshTokenTtlSeconds: 30 * 24 * 3600,
      ...(options.dpopNonceSecret === undefined ? {} : { dpopNonceSecret: options.dpopNonceSecret }),
    },
    secrets,
  });
  await auth.module.start();

  const server: AuthTestServer = {
    url,
    issuer: auth.issuer,
    adminToken,
    pool: database.pool,
    session: database.session,
    store,
    clock,
    secrets,
    auth,
    async registerClient(client = {}) {
      const admin = { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' };
      const organization = (await (
        await fetch(`${url}/admin/organizations`, {
          method: 'POST',
          headers: admin,
          body: JSON.stringify({ name: 'Acme' }),
        })
      ).json()) as { results: { id: number } };
      const response = await fetch(`${url}/admin/organizations/${organization.results.id}/clients`, {
        method: 'POST',
        headers: admin,
        body: JSON.stringify({
          name: 'Acme integration',
          redirect_uri: client.redirectUri ?? TEST_REDIRECT_URI,
          scopes: client.scopes ?? ['read', 'write', 'operations'],
          dpop_bound_access_tokens: client.dpopBoundAccessTokens ?? false,
        }),
      });
      if (response.status !== 201) throw new Error(`client registration failed: ${await response.text()}`);
      return ((await response.json()) as { results: RegisteredClient }).results;
    },
    async codeGrant(client) {
      const query = new URLSearchParams({
        response_type: 'code',
        client_id: client.client_id,
        redirect_uri: TEST_REDIRECT_URI,
      });
      const redirect = await fetch(`${url}/oauth/authorize?${query.toString()}`, { redirect: 'manual' });
      const code = new URL(redirect.headers.get('location')!).searchParams.get('code');
      if (code === null) throw new Error(`no code: ${redirect.headers.get('location')}`);
      const response = await server.postForm('/oauth/token', {
        grant_type: 'authorization_code',
        code,
        redirect_uri: TEST_REDIRECT_URI,
        client_id: client.client_id,
        client_secret: client.client_secret,
      });
      if (response.status !== 200) throw new Error(`code grant failed: ${await response.text()}`);
      return { ...((await response.json()) as { access_token: string; refresh_token: string }), code };
    },
    postForm(path, form, headers = {}) {
      return fetch(`${url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams(form).toString(),
      });
    },
    async close() {
      await auth.module.stop();
      await closeServer(listening.server);
      await database.drop();
    },
  };
  app = createHttpApp({
    logger,
    metrics: createMetricsRegistry('auth-test'),
    ready: () => true,
    routes: [...auth.routes, ...auth.adminRoutes, ...(options.routes?.(server) ?? [])],
    ...(options.trustedProxyHops === undefined ? {} : { trustedProxyHops: options.trustedProxyHops }),
  });
  return server;
}
