import { runOrderctl } from '../cli/run-orderctl.js';
import { startAuthTestServer, type AuthTestServer } from '../testing/auth-test-server.js';

// jest's asymmetric matchers are typed any; as unknown they fit any expected shape.
const anyString: unknown = expect.any(String);
const anyNumber: unknown = expect.any(Number);

describe('administration API (API.md §10)', () => {
  let server: AuthTestServer;
  beforeAll(async () => {
    server = await startAuthTestServer();
  });
  afterAll(() => server.close());

  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${server.adminToken}`,
        'content-type': 'application/json',
        ...headers,
      },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });

  async function organizationId(): Promise<number> {
    const response = await post('/admin/organizations', { name: 'Globex' });
    return ((await response.json()) as { results: { id: number } }).results.id;
  }

  it('requires the admin token', async () => {
    const missing = await fetch(`${server.url}/admin/organizations`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Initech' }),
    });
    expect(missing.status).toBe(401);
    expect(missing.headers.get('www-authenticate')).toBe('Bearer');
    const wrong = await post(
      '/admin/organizations',
      { name: 'Initech' },
      { authorization: 'Bearer not-the-token' },
    );
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('www-authenticate')).toMatch(/^Bearer error="invalid_token"/);
    expect(await wrong.json()).toEqual({
      count: 0,
      results: null,
      errors: { base: ['The admin token is not valid'] },
    });
  });

  it('creates an organization', async () => {
    const response = await post('/admin/organizations', { name: '  Initech  ' });
    expect(response.status).toBe(201);
    expect(await response.json()).toEqual({
      count: 1,
      results: { id: anyNumber, name: 'Initech', created_at: anyString },
      errors: null,
    });
  });

  it('creates a client whose secret is shown once and works', async () => {
    const id = await organizationId();
    const response = await post(`/admin/organizations/${id}/clients`, {
      name: 'Warehouse sync',
      redirect_uri: 'https://sync.example.com/oauth/callback',
      scopes: ['read', 'operations'],
    });
    expect(response.status).toBe(201);
    expect(response.headers.get('cache-control')).toBe('no-store');
    const { results } = (await response.json()) as { results: Record<string, unknown> };
    expect(results).toMatchObject({
      client_id: anyString,
      client_secret: anyString,
      organization_id: id,
      name: 'Warehouse sync',
      redirect_uri: 'https://sync.example.com/oauth/callback',
      scopes: ['read', 'operations'],
    });
    const token = await server.postForm('/oauth/token', {
      grant_type: 'client_credentials',
      client_id: results.client_id as string,
      client_secret: results.client_secret as string,
    });
    expect(await token.json()).toMatchObject({ scope: 'read operations' });
  });

  it('answers invalid fields with 422 and column errors', async () => {
    const id = await organizationId();
    const response = await post(`/admin/organizations/${id}/clients`, {
      name: '',
      redirect_uri: 'http://example.com/callback',
      scopes: ['read', 'admin'],
    });
    expect(response.status).toBe(422);
    const body = (await response.json()) as { errors: Record<string, string[]> };
    expect(Object.keys(body.errors).sort()).toEqual(['name', 'redirect_uri', 'scopes[1]']);
    const missing = await post('/admin/organizations', {});
    expect(await missing.json()).toMatchObject({ errors: { name: ['is required'] } });
  });

  it('answers an unknown organization with 404', async () => {
    const response = await post('/admin/organizations/999999/clients', {
      name: 'x',
      redirect_uri: 'https://x.example/cb',
      scopes: ['read'],
    });
    expect(response.status).toBe(404);
  });

  it('refuses a body that is not JSON with 415', async () => {
    const response = await post('/admin/organizations', 'name=x', {
      'content-type': 'application/x-www-form-urlencoded',
    });
    expect(response.status).toBe(415);
  });

  describe('orderctl', () => {
    async function orderctl(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
      let out = '';
      let err = '';
      const code = await runOrderctl(argv, {
        env: { ADMIN_TOKEN: server.adminToken },
        fetch,
        stdout: (text) => (out += text),
        stderr: (text) => (err += text),
      });
      return { code, out, err };
    }

    it('creates an organization and a client and prints them as JSON', async () => {
      const organization = await orderctl('--url', server.url, 'create-organization', '--name', 'Umbrella');
      expect(organization.code).toBe(0);
      const { results } = JSON.parse(organization.out) as { results: { id: number } };
      const client = await orderctl(
        '--url',
        server.url,
        'create-client',
        '--organization',
        String(results.id),
        '--name',
        'Umbrella app',
        '--redirect-uri',
        'https://umbrella.example/cb',
        '--scopes',
        'read,write',
      );
      expect(client.code).toBe(0);
      expect(JSON.parse(client.out)).toMatchObject({
        results: {
          organization_id: results.id,
          scopes: ['read', 'write'],
          client_secret: anyString,
        },
      });
    });

    it('exits 1 with the API’s answer when the API refuses', async () => {
      const result = await orderctl(
        '--url',
        server.url,
        '--admin-token',
        'wrong',
        'create-organization',
        '--name',
        'x',
      );
      expect(result.code).toBe(1);
      expect(result.err).toContain('The admin token is not valid');
    });

    it('exits 2 with usage on a bad command line', async () => {
      expect((await orderctl('create-client', '--name', 'x')).code).toBe(2);
      expect((await orderctl('frobnicate')).code).toBe(2);
    });
  });
});
