import { startAuthTestServer, TEST_REDIRECT_URI, type AuthTestServer } from '../testing/auth-test-server.js';

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

  const get = (path: string) =>
    fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${server.adminToken}` } });

  async function createClient(organization: number, body: Record<string, unknown> = {}): Promise<ClientJson> {
    const response = await post(`/admin/organizations/${organization}/clients`, {
      name: 'Batch sync',
      scopes: ['read', 'write'],
      ...body,
    });
    expect(response.status).toBe(201);
    return ((await response.json()) as { results: ClientJson }).results;
  }

  async function clientCredentials(client: { client_id: string; client_secret: string }): Promise<Response> {
    return server.postForm('/oauth/token', {
      grant_type: 'client_credentials',
      client_id: client.client_id,
      client_secret: client.client_secret,
    });
  }

  async function authenticates(accessToken: string): Promise<number> {
    return (
      await fetch(`${server.url}/v2/authenticate`, { headers: { authorization: `Bearer ${accessToken}` } })
    ).status;
  }

  describe('listing', () => {
    it('lists organizations by id, a page at a time, with the total', async () => {
      const ids = [await organizationId(), await organizationId(), await organizationId()];
      const all = (await (await get('/admin/organizations?limit=1000')).json()) as SearchJson<{ id: number }>;
      expect(all.results.map((o) => o.id)).toEqual(expect.arrayContaining(ids));
      expect(all.results.map((o) => o.id)).toEqual([...all.results.map((o) => o.id)].sort((a, b) => a - b));
      const page = (await (await get(`/admin/organizations?limit=2&offset=1`)).json()) as SearchJson<unknown>;
      expect(page).toMatchObject({ count: 2, total_results: all.total_results, offset: 1, errors: null });
      expect(page.results).toEqual(all.results.slice(1, 3));
      const past = (await (await get(`/admin/organizations?offset=100000`)).json()) as SearchJson<unknown>;
      expect(past).toMatchObject({ count: 0, total_results: all.total_results, results: [] });
    });

    it('answers a bad page with 400 naming the parameter, and another parameter with 400', async () => {
      const zero = await get('/admin/organizations?limit=0');
      expect(zero.status).toBe(400);
      expect(await zero.json()).toMatchObject({ errors: { limit: ['must be an integer from 1 to 1000'] } });
      const other = await get('/admin/organizations?name=x');
      expect(other.status).toBe(400);
      expect(((await other.json()) as { errors: Record<string, unknown> }).errors).toHaveProperty('name');
    });

    it("lists an organization's clients without their secrets, and 404 for an unknown organization", async () => {
      const id = await organizationId();
      const first = await createClient(id, { name: 'first' });
      const second = await createClient(id, { name: 'second', redirect_uri: 'https://b.example/cb' });
      const response = await get(`/admin/organizations/${id}/clients`);
      expect(response.status).toBe(200);
      const body = (await response.json()) as SearchJson<Record<string, unknown>>;
      expect(body).toMatchObject({ count: 2, total_results: 2, offset: 0, errors: null });
      expect(body.results).toEqual([
        {
          client_id: first.client_id,
          organization_id: id,
          name: 'first',
          redirect_uri: null,
          scopes: ['read', 'write'],
          created_at: anyString,
          disabled_at: null,
          jwks: null,
          dpop_bound_access_tokens: false,
        },
        expect.objectContaining({ client_id: second.client_id, redirect_uri: 'https://b.example/cb' }),
      ]);
      expect(JSON.stringify(body)).not.toContain(first.client_secret);
      expect((await get('/admin/organizations/999999/clients')).status).toBe(404);
      expect((await get('/admin/organizations/abc/clients')).status).toBe(404);
    });

    it('requires the admin token', async () => {
      expect((await fetch(`${server.url}/admin/organizations`)).status).toBe(401);
    });
  });

  describe('clients for the client_credentials grant alone', () => {
    it('registers a client without a redirect URI; it gets tokens and cannot authorize', async () => {
      const client = await createClient(await organizationId());
      expect(client.redirect_uri).toBeNull();
      const token = await clientCredentials(client);
      expect(token.status).toBe(200);
      const authorize = await fetch(
        `${server.url}/oauth/authorize?response_type=code&client_id=${client.client_id}`,
        { redirect: 'manual' },
      );
      expect(authorize.status).toBe(400);
      expect(await authorize.text()).toContain('client_credentials grant only');
    });
  });

  describe('rotating a client secret', () => {
    it('answers the new secret once; the old one stops working at once', async () => {
      const client = await createClient(await organizationId());
      const response = await post(`/admin/clients/${client.client_id}/rotate_secret`, {});
      expect(response.status).toBe(200);
      expect(response.headers.get('cache-control')).toBe('no-store');
      const { results } = (await response.json()) as { results: ClientJson };
      expect(results).toMatchObject({ client_id: client.client_id, client_secret: anyString });
      expect(results.client_secret).not.toBe(client.client_secret);
      expect((await clientCredentials(client)).status).toBe(401);
      expect((await clientCredentials(results)).status).toBe(200);
    });

    it('answers an unknown client with 404', async () => {
      expect((await post('/admin/clients/no-such-client/rotate_secret', {})).status).toBe(404);
    });
  });

  describe('disabling a client', () => {
    it('revokes its grants and tokens (they stop working) and refuses it from then on', async () => {
      const client = await createClient(await organizationId(), { redirect_uri: TEST_REDIRECT_URI });
      const tokens = (await (await clientCredentials(client)).json()) as { access_token: string };
      expect(await authenticates(tokens.access_token)).toBe(200);
      const code = await server.codeGrant(client);
      expect(await authenticates(code.access_token)).toBe(200);

      const response = await post(`/admin/clients/${client.client_id}/disable`, {});
      expect(response.status).toBe(200);
      const { results } = (await response.json()) as { results: ClientJson & { revoked_grants: number } };
      expect(results).toMatchObject({
        client_id: client.client_id,
        disabled_at: anyString,
        revoked_grants: 1,
      });

      expect(await authenticates(tokens.access_token)).toBe(401);
      expect(await authenticates(code.access_token)).toBe(401);
      const again = await clientCredentials(client);
      expect(again.status).toBe(401);
      expect(await again.json()).toEqual({
        error: 'invalid_client',
        error_description: 'The client is disabled',
      });
      const refresh = await server.postForm('/oauth/token', {
        grant_type: 'refresh_token',
        refresh_token: code.refresh_token,
        client_id: client.client_id,
        client_secret: client.client_secret,
      });
      expect(refresh.status).toBe(401);
      // Announced like any revocation (API.md §7), so resource servers drop its tokens too: the grant
      // of its code, and the client itself for its client-credentials tokens, which are stored nowhere.
      const { rows } = await server.pool.query<{ grants: number; clients: number }>(
        `SELECT count(*) FILTER (WHERE data->>'grant_id' IN (SELECT id::text FROM auth.grants WHERE client_id = $1))::int AS grants,
                count(*) FILTER (WHERE data->>'client_id' = $1)::int AS clients
           FROM es.events WHERE type = 'grant.revoked'`,
        [client.client_id],
      );
      expect(rows[0]).toEqual({ grants: 1, clients: 1 });
      const listed = (await (
        await get(`/admin/organizations/${client.organization_id}/clients`)
      ).json()) as SearchJson<ClientJson>;
      expect(listed.results[0]!.disabled_at).toBe(results.disabled_at);
    });

    it('is idempotent, and a disabled client gets no new secret', async () => {
      const client = await createClient(await organizationId());
      const first = (await (await post(`/admin/clients/${client.client_id}/disable`, {})).json()) as {
        results: ClientJson;
      };
      const second = await post(`/admin/clients/${client.client_id}/disable`, {});
      expect(second.status).toBe(200);
      expect(await second.json()).toMatchObject({
        results: { disabled_at: first.results.disabled_at, revoked_grants: 0 },
      });
      const rotate = await post(`/admin/clients/${client.client_id}/rotate_secret`, {});
      expect(rotate.status).toBe(409);
      expect((await post('/admin/clients/no-such-client/disable', {})).status).toBe(404);
    });

    it('stores nothing for a client-credentials token, and issues no refresh token', async () => {
      const client = await createClient(await organizationId());
      const response = await clientCredentials(client);
      expect(response.status).toBe(200);
      expect(await response.json()).not.toHaveProperty('refresh_token');
      const { rows } = await server.pool.query<{ grants: number; refresh_tokens: number }>(
        `SELECT (SELECT count(*)::int FROM auth.grants WHERE client_id = $1) AS grants,
                (SELECT count(*)::int FROM auth.refresh_tokens rt JOIN auth.grants g ON g.id = rt.grant_id
                  WHERE g.client_id = $1) AS refresh_tokens`,
        [client.client_id],
      );
      expect(rows[0]).toEqual({ grants: 0, refresh_tokens: 0 });
    });
  });
});

interface ClientJson {
  client_id: string;
  client_secret: string;
  organization_id: number;
  name: string;
  redirect_uri: string | null;
  scopes: string[];
  disabled_at: string | null;
}

interface SearchJson<T> {
  count: number;
  total_results: number;
  offset: number;
  results: T[];
  errors: null;
}
