import * as oidc from 'openid-client';
import type { RegisteredClient } from '../tenants.js';
import { startAuthTestServer, TEST_REDIRECT_URI, type AuthTestServer } from '../testing/auth-test-server.js';

// jest's asymmetric matchers are typed any; as unknown they fit any expected shape.
const anyString: unknown = expect.any(String);

describe('OAuth 2.0 endpoints (API.md §7)', () => {
  let server: AuthTestServer;
  let registered: RegisteredClient;
  let config: oidc.Configuration;

  beforeAll(async () => {
    server = await startAuthTestServer();
    registered = await server.registerClient();
    // RFC 8414 discovery against the issuer; plain http is fine on loopback in a test.
    config = await oidc.discovery(
      new URL(server.issuer),
      registered.client_id,
      registered.client_secret,
      undefined,
      { algorithm: 'oauth2', execute: [oidc.allowInsecureRequests] },
    );
  });
  afterAll(() => server.close());

  /** Runs the authorization request and returns the redirect it answers with. */
  async function authorize(parameters: Record<string, string>): Promise<URL> {
    const url = oidc.buildAuthorizationUrl(config, { redirect_uri: TEST_REDIRECT_URI, ...parameters });
    const response = await fetch(url, { redirect: 'manual' });
    expect(response.status).toBe(302);
    return new URL(response.headers.get('location')!);
  }

  interface CodeFlowResult {
    access_token: string;
    refresh_token: string;
    token_type: string;
    expires_in: number | undefined;
    scope: string | undefined;
    /** The authorization code the tokens were issued for. */
    code: string;
  }

  /** Runs the code flow with PKCE through openid-client. */
  async function codeFlow(scope?: string): Promise<CodeFlowResult> {
    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const redirect = await authorize({
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      ...(scope === undefined ? {} : { scope }),
    });
    const tokens = await oidc.authorizationCodeGrant(config, redirect, {
      pkceCodeVerifier: verifier,
      expectedState: state,
    });
    return {
      access_token: tokens.access_token,
      refresh_token: tokens.refresh_token!,
      token_type: tokens.token_type,
      expires_in: tokens.expires_in,
      scope: tokens.scope,
      code: redirect.searchParams.get('code')!,
    };
  }

  async function introspect(token: string): Promise<boolean> {
    return (await oidc.tokenIntrospection(config, token)).active;
  }

  async function refreshRaw(refreshToken: string): Promise<Response> {
    return server.postForm('/oauth/token', {
      grant_type: 'refresh_token',
      refresh_token: refreshToken,
      client_id: registered.client_id,
      client_secret: registered.client_secret,
    });
  }

  describe('metadata', () => {
    it('publishes RFC 8414 metadata whose issuer is the public URL', async () => {
      const metadata = config.serverMetadata();
      expect(metadata.issuer).toBe(server.url);
      expect(metadata.token_endpoint).toBe(`${server.url}/oauth/token`);
      expect(metadata.code_challenge_methods_supported).toEqual(['S256']);
    });

    it('publishes the signing key as JWKS', async () => {
      const jwks = (await (await fetch(`${server.url}/.well-known/jwks.json`)).json()) as {
        keys: { kty: string; alg: string; kid: string }[];
      };
      expect(jwks.keys).toHaveLength(1);
      expect(jwks.keys[0]).toMatchObject({ kty: 'RSA', alg: 'RS256', use: 'sig' });
    });
  });

  describe('authorization code flow', () => {
    it('issues tokens for a code with PKCE and passes state back', async () => {
      const tokens = await codeFlow('read');
      expect(tokens).toMatchObject({ token_type: 'bearer', expires_in: 10800, scope: 'read' });
      expect(tokens.refresh_token).toEqual(anyString);
      expect(await introspect(tokens.access_token)).toBe(true);
    });

    it('writes the documented claims into the access token', async () => {
      const tokens = await codeFlow();
      const [header, payload] = tokens.access_token
        .split('.')
        .slice(0, 2)
        .map((part) => JSON.parse(Buffer.from(part, 'base64url').toString()) as Record<string, unknown>);
      expect(header).toMatchObject({ alg: 'RS256', typ: 'at+jwt', kid: anyString });
      expect(payload).toMatchObject({
        iss: server.issuer,
        aud: server.issuer,
        sub: registered.client_id,
        client_id: registered.client_id,
        org: registered.organization_id,
        scope: 'read write operations',
        jti: anyString,
        gid: anyString,
      });
      expect((payload!.exp as number) - (payload!.iat as number)).toBe(10800);
    });

    it('answers an unknown client_id with 401 and no redirect', async () => {
      const response = await fetch(`${server.url}/oauth/authorize?response_type=code&client_id=nobody`, {
        redirect: 'manual',
      });
      expect(response.status).toBe(401);
      expect(response.headers.get('location')).toBeNull();
      expect(await response.text()).toContain('Invalid client_id');
    });

    it('answers another redirect_uri with 400 and no redirect', async () => {
      const query = new URLSearchParams({
        response_type: 'code',
        client_id: registered.client_id,
        redirect_uri: 'https://attacker.example/callback',
      });
      const response = await fetch(`${server.url}/oauth/authorize?${query.toString()}`, {
        redirect: 'manual',
      });
      expect(response.status).toBe(400);
      expect(response.headers.get('location')).toBeNull();
    });

    it('redirects other errors to the client with state', async () => {
      const plain = await authorize({
        code_challenge: 'x'.repeat(43),
        code_challenge_method: 'plain',
        state: 's1',
      });
      expect(Object.fromEntries(plain.searchParams)).toMatchObject({ error: 'invalid_request', state: 's1' });
      const wide = await authorize({ scope: 'read admin', state: 's2' });
      expect(Object.fromEntries(wide.searchParams)).toMatchObject({ error: 'invalid_scope', state: 's2' });
    });

    it('refuses a wrong code_verifier and spends the code (API.md §12)', async () => {
      const verifier = oidc.randomPKCECodeVerifier();
      const redirect = await authorize({
        code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
      });
      const redeem = (codeVerifier: string) =>
        server.postForm('/oauth/token', {
          grant_type: 'authorization_code',
          code: redirect.searchParams.get('code')!,
          redirect_uri: TEST_REDIRECT_URI,
          code_verifier: codeVerifier,
          client_id: registered.client_id,
          client_secret: registered.client_secret,
        });
      const wrong = await redeem(oidc.randomPKCECodeVerifier());
      expect(wrong.status).toBe(400);
      expect(await wrong.json()).toMatchObject({
        error: 'invalid_grant',
        error_description: 'The code_verifier does not match the code_challenge',
      });
      const right = await redeem(verifier);
      expect(right.status).toBe(400);
      expect(await right.json()).toMatchObject({
        error: 'invalid_grant',
        error_description: 'The authorization code was already used',
      });
    });

    it('revokes the tokens issued from a code that is used twice', async () => {
      const tokens = await codeFlow();
      const again = await server.postForm('/oauth/token', {
        grant_type: 'authorization_code',
        code: tokens.code,
        client_id: registered.client_id,
        client_secret: registered.client_secret,
      });
      expect(again.status).toBe(400);
      expect(await again.json()).toMatchObject({ error: 'invalid_grant' });
      expect(await introspect(tokens.access_token)).toBe(false);
      expect((await refreshRaw(tokens.refresh_token)).status).toBe(400);
    });

    it('refuses an expired code', async () => {
      const redirect = await authorize({});
      server.clock.advance(10 * 60_000 + 1);
      const response = await server.postForm('/oauth/token', {
        grant_type: 'authorization_code',
        code: redirect.searchParams.get('code')!,
        client_id: registered.client_id,
        client_secret: registered.client_secret,
      });
      expect(await response.json()).toMatchObject({ error: 'invalid_grant' });
    });
  });

  describe('refresh', () => {
    it('rotates the refresh token and may narrow the scope', async () => {
      const first = await codeFlow();
      const second = await oidc.refreshTokenGrant(config, first.refresh_token, { scope: 'read' });
      expect(second).toMatchObject({ token_type: 'bearer', expires_in: 10800, scope: 'read' });
      expect(second.refresh_token).not.toBe(first.refresh_token);
      const widened = await server.postForm('/oauth/token', {
        grant_type: 'refresh_token',
        refresh_token: second.refresh_token!,
        scope: 'read admin',
        client_id: registered.client_id,
        client_secret: registered.client_secret,
      });
      expect(await widened.json()).toMatchObject({ error: 'invalid_scope' });
    });

    it('revokes the whole grant when a rotated-out token is presented again', async () => {
      const first = await codeFlow();
      const second = await oidc.refreshTokenGrant(config, first.refresh_token);
      const third = await oidc.refreshTokenGrant(config, second.refresh_token!);
      const replay = await refreshRaw(first.refresh_token);
      expect(replay.status).toBe(400);
      expect(await replay.json()).toMatchObject({ error: 'invalid_grant' });
      expect((await refreshRaw(third.refresh_token!)).status).toBe(400);
      expect(await introspect(third.access_token)).toBe(false);
      expect(await introspect(first.access_token)).toBe(false);
    });

    it('lets the token rotated out last retry once within 60 s, superseding the pair issued before', async () => {
      const first = await codeFlow();
      const lost = await oidc.refreshTokenGrant(config, first.refresh_token);
      const retried = await refreshRaw(first.refresh_token);
      expect(retried.status).toBe(200);
      const fresh = (await retried.json()) as { access_token: string; refresh_token: string };
      expect(await introspect(lost.access_token)).toBe(false);
      expect(await introspect(fresh.access_token)).toBe(true);

      const secondRetry = await refreshRaw(first.refresh_token);
      expect(secondRetry.status).toBe(400);
      expect(await introspect(fresh.access_token)).toBe(false);
    });

    it('treats the superseded pair’s refresh token as reuse', async () => {
      const first = await codeFlow();
      const lost = await oidc.refreshTokenGrant(config, first.refresh_token);
      const fresh = (await (await refreshRaw(first.refresh_token)).json()) as { refresh_token: string };
      expect((await refreshRaw(lost.refresh_token!)).status).toBe(400);
      expect((await refreshRaw(fresh.refresh_token)).status).toBe(400);
    });

    it('treats a retry after 60 s as reuse', async () => {
      const first = await codeFlow();
      const second = await oidc.refreshTokenGrant(config, first.refresh_token);
      server.clock.advance(61_000);
      expect((await refreshRaw(first.refresh_token)).status).toBe(400);
      expect(await introspect(second.access_token)).toBe(false);
    });

    it('refuses another client’s refresh token', async () => {
      const tokens = await codeFlow();
      const other = await server.registerClient();
      const response = await server.postForm('/oauth/token', {
        grant_type: 'refresh_token',
        refresh_token: tokens.refresh_token,
        client_id: other.client_id,
        client_secret: other.client_secret,
      });
      expect(await response.json()).toMatchObject({ error: 'invalid_grant' });
    });
  });

  describe('client credentials', () => {
    it('issues tokens to an authenticated client, narrowed on request', async () => {
      const tokens = await oidc.clientCredentialsGrant(config, { scope: 'read write' });
      expect(tokens).toMatchObject({ token_type: 'bearer', expires_in: 10800, scope: 'read write' });
      expect(await introspect(tokens.access_token)).toBe(true);
    });

    it('answers with no-store caching', async () => {
      const response = await server.postForm('/oauth/token', {
        grant_type: 'client_credentials',
        client_id: registered.client_id,
        client_secret: registered.client_secret,
      });
      expect(response.status).toBe(200);
      expect(response.headers.get('cache-control')).toBe('no-store');
    });

    it('accepts HTTP Basic client authentication', async () => {
      const basic = Buffer.from(
        `${encodeURIComponent(registered.client_id)}:${encodeURIComponent(registered.client_secret)}`,
      ).toString('base64');
      const response = await server.postForm(
        '/oauth/token',
        { grant_type: 'client_credentials', scope: 'read' },
        { authorization: `Basic ${basic}` },
      );
      expect(response.status).toBe(200);
    });

    it('answers a wrong Basic secret with 401 invalid_client and a Basic challenge', async () => {
      const basic = Buffer.from(`${registered.client_id}:wrong`).toString('base64');
      const response = await server.postForm(
        '/oauth/token',
        { grant_type: 'client_credentials' },
        { authorization: `Basic ${basic}` },
      );
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toMatch(/^Basic /);
      expect(await response.json()).toMatchObject({ error: 'invalid_client' });
    });

    it('answers a wrong body secret with 401 invalid_client', async () => {
      const response = await server.postForm('/oauth/token', {
        grant_type: 'client_credentials',
        client_id: registered.client_id,
        client_secret: 'wrong',
      });
      expect(response.status).toBe(401);
      expect(await response.json()).toMatchObject({ error: 'invalid_client' });
    });

    it('refuses a scope the client was not registered for', async () => {
      const readOnly = await server.registerClient({ scopes: ['read'] });
      const response = await server.postForm('/oauth/token', {
        grant_type: 'client_credentials',
        scope: 'write',
        client_id: readOnly.client_id,
        client_secret: readOnly.client_secret,
      });
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({ error: 'invalid_scope' });
    });
  });

  describe('request errors (RFC 6749 §5.2)', () => {
    const credentials = () => ({ client_id: registered.client_id, client_secret: registered.client_secret });

    it('names an unsupported grant type', async () => {
      const response = await server.postForm('/oauth/token', { grant_type: 'password', ...credentials() });
      expect(await response.json()).toMatchObject({ error: 'unsupported_grant_type' });
    });

    it('requires grant_type', async () => {
      const response = await server.postForm('/oauth/token', credentials());
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({ error: 'invalid_request' });
    });

    it('refuses a repeated parameter', async () => {
      const body = new URLSearchParams({ grant_type: 'client_credentials', ...credentials() });
      body.append('scope', 'read');
      body.append('scope', 'write');
      const response = await fetch(`${server.url}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: body.toString(),
      });
      expect(await response.json()).toMatchObject({ error: 'invalid_request' });
    });

    it('refuses a JSON body', async () => {
      const response = await fetch(`${server.url}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ grant_type: 'client_credentials', ...credentials() }),
      });
      expect(response.status).toBe(400);
      expect(await response.json()).toMatchObject({ error: 'invalid_request' });
    });

    it('answers what the pipeline refuses (405, 413) in the same format, never the /v2 envelope (API.md §7)', async () => {
      const get = await fetch(`${server.url}/oauth/token`);
      expect(get.status).toBe(405);
      expect(get.headers.get('allow')).toBe('POST');
      expect(await get.json()).toEqual({
        error: 'invalid_request',
        error_description: 'GET is not allowed here',
      });
      const large = await server.postForm('/oauth/revoke', { ...credentials(), token: 'x'.repeat(70_000) });
      expect(large.status).toBe(413);
      expect(large.headers.get('cache-control')).toBe('no-store');
      expect(await large.json()).toEqual({
        error: 'invalid_request',
        error_description: 'Request body exceeds 65536 bytes',
      });
    });
  });

  describe('revocation and introspection', () => {
    it('revokes the grant of a refresh token (RFC 7009)', async () => {
      const tokens = await codeFlow();
      await oidc.tokenRevocation(config, tokens.refresh_token);
      expect(await introspect(tokens.access_token)).toBe(false);
      expect((await refreshRaw(tokens.refresh_token)).status).toBe(400);
    });

    it('revokes the grant of an access token', async () => {
      const tokens = await oidc.clientCredentialsGrant(config);
      await oidc.tokenRevocation(config, tokens.access_token);
      expect(await introspect(tokens.access_token)).toBe(false);
    });

    it('answers 200 for a token it does not know', async () => {
      await expect(oidc.tokenRevocation(config, 'no-such-token')).resolves.toBeUndefined();
    });

    it('describes an active access token (RFC 7662)', async () => {
      const tokens = await oidc.clientCredentialsGrant(config, { scope: 'read' });
      const description = await oidc.tokenIntrospection(config, tokens.access_token);
      const claims = JSON.parse(
        Buffer.from(tokens.access_token.split('.')[1]!, 'base64url').toString(),
      ) as Record<string, unknown>;
      expect(description).toMatchObject({
        active: true,
        scope: 'read',
        client_id: registered.client_id,
        token_type: 'bearer',
        iss: server.issuer,
      });
      // RFC 9068 §2.2's claims, as the token carries them.
      for (const claim of ['iss', 'sub', 'client_id', 'aud', 'org', 'scope', 'jti', 'iat', 'exp'])
        expect(description[claim]).toEqual(claims[claim]);
    });

    it('refuses to revoke another client’s token with invalid_grant, and leaves it live (RFC 7009 §2.1)', async () => {
      const other = await server.registerClient();
      const tokens = await oidc.clientCredentialsGrant(config);
      const response = await server.postForm('/oauth/revoke', {
        token: tokens.access_token,
        client_id: other.client_id,
        client_secret: other.client_secret,
      });
      expect(response.status).toBe(400);
      expect(await response.json()).toEqual({
        error: 'invalid_grant',
        error_description: 'The token was issued to another client',
      });
      expect(await introspect(tokens.access_token)).toBe(true);
    });

    it('reports another client’s token as inactive', async () => {
      const other = await server.registerClient();
      const response = await server.postForm('/oauth/introspect', {
        token: (await oidc.clientCredentialsGrant(config)).access_token,
        client_id: other.client_id,
        client_secret: other.client_secret,
      });
      expect(await response.json()).toEqual({ active: false });
    });

    it('requires client authentication', async () => {
      const response = await server.postForm('/oauth/introspect', { token: 'x' });
      expect(response.status).toBe(401);
    });
  });
});
