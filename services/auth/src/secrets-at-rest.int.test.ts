import { createPrivateKey, createPublicKey, randomBytes } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { SecretsKeyring, StartupError, sealedContext } from '@ofp/runtime';
import { testLogger } from '@ofp/testing';
import { createAuthService, type AuthService } from './module.js';
import { startAuthTestServer, type AuthTestServer } from './testing/auth-test-server.js';

/** API.md §12: the signing keys are stored sealed under the key-encryption key, never in clear. */
describe('signing keys at rest', () => {
  let server: AuthTestServer;

  beforeEach(async () => {
    server = await startAuthTestServer();
  });

  afterEach(async () => {
    await server.close();
  });

  /** The auth service again on the same database, as a restarted replica with `secrets` is. */
  function replica(secrets: SecretsKeyring): AuthService {
    return createAuthService({
      pool: server.pool,
      store: server.store,
      logger: testLogger('auth-replica'),
      clock: server.clock,
      settings: {
        publicUrl: server.url,
        adminToken: server.adminToken,
        rateLimit: { capacity: 100, refillPerSecond: 100 },
        failedAuthentication: { capacity: 100, refillPerSecond: 100 },
        refreshTokenTtlSeconds: 3600,
      },
      secrets,
    });
  }

  async function storedKeys(): Promise<{ kid: string; private_key: string; retired_at: Date | null }[]> {
    const { rows } = await server.pool.query<{ kid: string; private_key: string; retired_at: Date | null }>(
      'SELECT kid, private_key, retired_at FROM auth.signing_keys ORDER BY created_at',
    );
    return rows;
  }

  async function tokenOf(): Promise<string> {
    const client = await server.registerClient();
    const response = await server.postForm('/oauth/token', {
      grant_type: 'client_credentials',
      client_id: client.client_id,
      client_secret: client.client_secret,
    });
    expect(response.status).toBe(200);
    return ((await response.json()) as { access_token: string }).access_token;
  }

  /** Checks a token's signature against the published JWKS, as every verifier does. */
  async function verifiesAgainstJwks(token: string): Promise<string> {
    const { keys } = (await (await fetch(`${server.url}/.well-known/jwks.json`)).json()) as {
      keys: { kid: string }[];
    };
    const { header } = jwt.decode(token, { complete: true })!;
    const jwk = keys.find((k) => k.kid === header.kid);
    expect(jwk).toBeDefined();
    jwt.verify(token, createPublicKey({ key: { ...jwk }, format: 'jwk' }), { algorithms: ['RS256'] });
    return header.kid!;
  }

  it('stores no private key in clear, first key and rotated ones alike', async () => {
    await fetch(`${server.url}/admin/signing_keys/rotate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${server.adminToken}` },
    });
    const stored = await storedKeys();
    expect(stored).toHaveLength(2);
    for (const { kid, private_key } of stored) {
      expect(private_key).not.toContain('PRIVATE KEY');
      expect(private_key).toMatch(/^ofp-sealed:v1:test:/);
      // What is sealed is the key itself, for its own row only.
      const pem = server.secrets.open(private_key, sealedContext('auth.signing_keys', [kid]));
      expect(createPrivateKey(pem).asymmetricKeyType).toBe('rsa');
      expect(() =>
        server.secrets.open(private_key, sealedContext('auth.signing_keys', ['another'])),
      ).toThrow();
    }
    expect(await verifiesAgainstJwks(await tokenOf())).toBe(stored[1]!.kid);
  });

  it('seals a key stored in clear at start, which then still signs', async () => {
    // A database from before: the signer's private key as a clear PKCS#8 PEM.
    const [signer] = await storedKeys();
    const pem = server.secrets.open(signer!.private_key, sealedContext('auth.signing_keys', [signer!.kid]));
    await server.pool.query('UPDATE auth.signing_keys SET private_key = $1 WHERE kid = $2', [
      pem,
      signer!.kid,
    ]);

    const restarted = replica(server.secrets);
    await restarted.module.start();
    const [after] = await storedKeys();
    expect(after!.private_key).not.toContain('PRIVATE KEY');
    expect(server.secrets.open(after!.private_key, sealedContext('auth.signing_keys', [after!.kid]))).toBe(
      pem,
    );
    // The server's own signer, read again from the table, signs tokens the JWKS verifies.
    server.clock.advance(10_000);
    expect(await verifiesAgainstJwks(await tokenOf())).toBe(signer!.kid);
  });

  it('re-wraps what an older key sealed when a new key comes first, the old one still listed', async () => {
    const [before] = await storedKeys();
    const newer = new SecretsKeyring([{ id: 'newer', key: randomBytes(32) }, ...server.secrets.keys]);
    await replica(newer).module.start();
    const [after] = await storedKeys();
    expect(after!.private_key).toMatch(/^ofp-sealed:v1:newer:/);
    const context = sealedContext('auth.signing_keys', [before!.kid]);
    expect(newer.open(after!.private_key, context)).toBe(server.secrets.open(before!.private_key, context));
    // Without the old key, the new one alone opens it now.
    expect(new SecretsKeyring([newer.keys[0]]).open(after!.private_key, context)).toContain('PRIVATE KEY');
  });

  it.each([
    ['another key under the same id', () => new SecretsKeyring([{ id: 'test', key: randomBytes(32) }])],
    ['no key with its id', () => new SecretsKeyring([{ id: 'other', key: randomBytes(32) }])],
  ])('refuses to start with %s: one line naming SECRETS_KEY_FILE', async (_, keys) => {
    const refused = await replica(keys())
      .module.start()
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(refused).toBeInstanceOf(StartupError);
    const message = (refused as Error).message;
    expect(message).toMatch(/^SECRETS_KEY_FILE: the secrets stored in auth\.signing_keys do not open/);
    expect(message).not.toContain('\n');
  });
});
