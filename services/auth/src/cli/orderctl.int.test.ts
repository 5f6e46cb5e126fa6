import { generateKeyPairSync } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { STANDALONE_FILES, acquireInstanceLock, type InstanceLock } from '@ofp/standalone';
import { freePort } from '@ofp/testing';
import { startAuthTestServer, type AuthTestServer } from '../testing/auth-test-server.js';
import { runOrderctl } from './run-orderctl.js';

describe('orderctl (API.md §10)', () => {
  let server: AuthTestServer;
  beforeAll(async () => {
    server = await startAuthTestServer();
  });
  afterAll(() => server.close());

  async function orderctl(
    argv: string[],
    env: Record<string, string> = { ADMIN_TOKEN: server.adminToken, ORDERCTL_URL: server.url },
  ): Promise<{ code: number; out: string; err: string }> {
    let out = '';
    let err = '';
    const code = await runOrderctl(argv, {
      env,
      fetch,
      stdout: (text) => (out += `${text}\n`),
      stderr: (text) => (err += `${text}\n`),
      version: '1.2.3',
    });
    return { code, out, err };
  }

  it('creates and lists organizations and clients, for a person and with --json for scripts', async () => {
    const organization = await orderctl(['create-organization', '--name', 'Umbrella']);
    expect(organization).toMatchObject({ code: 0, err: '' });
    const id = /Created organization (\d+) \(Umbrella\)\./.exec(organization.out)?.[1];
    expect(id).toBeDefined();

    const listed = await orderctl(['list-organizations', '--limit', '1000']);
    expect(listed.code).toBe(0);
    expect(listed.out).toMatch(/^ID +NAME +CREATED$/m);
    expect(listed.out).toMatch(new RegExp(`^${id} +Umbrella +\\S+$`, 'm'));

    const client = await orderctl([
      '--json',
      'create-client',
      '--organization',
      id!,
      '--name',
      'Umbrella sync',
      '--scopes',
      'read,write',
    ]);
    expect(client.code).toBe(0);
    const created = JSON.parse(client.out) as { results: { client_id: string; client_secret: string } };
    expect(created).toMatchObject({
      count: 1,
      results: { organization_id: Number(id), scopes: ['read', 'write'], redirect_uri: null },
      errors: null,
    });

    const clients = await orderctl(['list-clients', '--organization', id!]);
    expect(clients.code).toBe(0);
    expect(clients.out).toMatch(
      new RegExp(`^${created.results.client_id} +Umbrella sync +read,write +- +active$`, 'm'),
    );
    expect(clients.out).toContain('1 clients.');
    expect(clients.out).not.toContain(created.results.client_secret);
  });

  it('registers a private_key_jwt client from a JWKS file, bound to DPoP, and replaces its keys', async () => {
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'k1', use: 'sig', alg: 'ES256' };
    const directory = await mkdtemp(join(tmpdir(), 'orderctl-jwks-'));
    try {
      const file = join(directory, 'jwks.json');
      await writeFile(file, JSON.stringify({ keys: [jwk] }));
      const id = /Created organization (\d+)/.exec(
        (await orderctl(['create-organization', '--name', 'Keyed'])).out,
      )?.[1];
      const created = await orderctl([
        'create-client',
        '--organization',
        id!,
        '--name',
        'Keyed sync',
        '--scopes',
        'read',
        '--jwks',
        file,
        '--dpop',
      ]);
      expect(created).toMatchObject({ code: 0, err: '' });
      expect(created.out).toContain('auth method:   private_key_jwt (1 public keys, no secret)');
      expect(created.out).toContain('tokens:        DPoP-bound');
      expect(created.out).not.toContain('client_secret');
      const clientId = /client_id: +(\S+)/.exec(created.out)?.[1];
      await writeFile(file, JSON.stringify({ keys: [jwk, { ...jwk, kid: 'k2' }] }));
      const replaced = await orderctl(['set-client-keys', '--client', clientId!, '--jwks', file]);
      expect(replaced).toMatchObject({ code: 0, err: '' });
      expect(replaced.out).toContain('(2 public keys, no secret)');
      const missing = await orderctl([
        'set-client-keys',
        '--client',
        clientId!,
        '--jwks',
        join(directory, 'none'),
      ]);
      expect(missing.code).toBe(2);
      expect(missing.err).toMatch(/^orderctl: --jwks: cannot read /);
    } finally {
      await rm(directory, { recursive: true });
    }
  });

  it('rotates a secret and disables a client', async () => {
    const organization = JSON.parse(
      (await orderctl(['--json', 'create-organization', '--name', 'Initech'])).out,
    ) as {
      results: { id: number };
    };
    const created = JSON.parse(
      (
        await orderctl([
          '--json',
          'create-client',
          '--organization',
          String(organization.results.id),
          '--name',
          'app',
          '--redirect-uri',
          'https://initech.example/cb',
          '--scopes',
          'read',
        ])
      ).out,
    ) as { results: { client_id: string; client_secret: string } };

    const rotated = await orderctl(['rotate-client-secret', '--client', created.results.client_id]);
    expect(rotated.code).toBe(0);
    expect(rotated.out).toContain('New secret; the old one no longer works:');
    const secret = /client_secret: (\S+) +\(shown this once\)/.exec(rotated.out)?.[1];
    expect(secret).toBeDefined();
    expect(secret).not.toBe(created.results.client_secret);

    const disabled = await orderctl(['disable-client', '--client', created.results.client_id]);
    expect(disabled.code).toBe(0);
    expect(disabled.out).toMatch(/^Client \S+ is disabled \(since .+\); 0 grants revoked now\.$/m);
    const listed = await orderctl(['list-clients', '--organization', String(organization.results.id)]);
    expect(listed.out).toMatch(/ disabled \d{4}-/);
  });

  it('says what the API refused, and exits 1', async () => {
    const wrongToken = await orderctl(['create-organization', '--name', 'x'], {
      ADMIN_TOKEN: 'not-the-token',
      ORDERCTL_URL: server.url,
    });
    expect(wrongToken.code).toBe(1);
    expect(wrongToken.err).toBe(
      'orderctl: POST /admin/organizations answered 401: The admin token is not valid\n',
    );
    const invalid = await orderctl([
      'create-client',
      '--organization',
      '1',
      '--name',
      'x',
      '--scopes',
      'read,admin',
    ]);
    expect(invalid.code).toBe(1);
    expect(invalid.err).toContain('answered 422: scopes[1]: must be one of read, write, operations');
    const json = await orderctl(['--json', 'list-clients', '--organization', '999999']);
    expect(json.code).toBe(1);
    expect(JSON.parse(json.out)).toMatchObject({
      count: 0,
      results: null,
      errors: { base: [expect.any(String)] },
    });
  });

  it('names the cause when the platform cannot be reached', async () => {
    const port = await freePort();
    const result = await orderctl(['list-organizations'], {
      ADMIN_TOKEN: server.adminToken,
      ORDERCTL_URL: `http://127.0.0.1:${port}`,
    });
    expect(result.code).toBe(1);
    expect(result.err).toBe(
      `orderctl: cannot reach http://127.0.0.1:${port} (from ORDERCTL_URL): ECONNREFUSED 127.0.0.1:${port}\n`,
    );
  });

  it('prints its version, and exits 2 with usage on a bad command line', async () => {
    expect(await orderctl(['--version'])).toEqual({ code: 0, out: 'orderctl 1.2.3\n', err: '' });
    expect((await orderctl(['create-client', '--name', 'x'])).code).toBe(2);
    expect((await orderctl(['frobnicate'])).code).toBe(2);
    expect((await orderctl(['list-organizations', '--no-such-option'])).code).toBe(2);
  });

  describe('with nothing set', () => {
    let dataDir: string;
    let instance: InstanceLock;
    beforeAll(async () => {
      dataDir = await mkdtemp(join(tmpdir(), 'orderctl-'));
      // What a standalone instance leaves in its DATA_DIR while it runs (this process stands in for it).
      instance = await acquireInstanceLock(join(dataDir, STANDALONE_FILES.instance), { url: server.url });
      await writeFile(join(dataDir, STANDALONE_FILES.adminToken), `${server.adminToken}\n`);
    });
    afterAll(async () => {
      await instance.release();
      await rm(dataDir, { recursive: true, force: true });
    });

    it('finds the URL and the admin token of the instance running on DATA_DIR', async () => {
      const result = await orderctl(['list-organizations'], { DATA_DIR: dataDir });
      expect(result).toMatchObject({ code: 0, err: '' });
      expect(result.out).toMatch(/organizations\.$/m);
    });

    it('says that no instance runs there once it is gone', async () => {
      const empty = await mkdtemp(join(tmpdir(), 'orderctl-'));
      try {
        const result = await orderctl(['list-organizations'], { DATA_DIR: empty });
        expect(result.code).toBe(1);
        expect(result.err).toBe(
          `orderctl: no platform to talk to: no instance runs on DATA_DIR ${empty}; start one (npm start), or give --url (or set PUBLIC_URL or PORT)\n`,
        );
      } finally {
        await rm(empty, { recursive: true, force: true });
      }
    });
  });
});
