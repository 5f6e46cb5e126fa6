import { randomUUID } from 'node:crypto';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import * as oidc from 'openid-client';
import { startAuthTestServer, type AuthTestServer } from '../testing/auth-test-server.js';

const JWT_BEARER = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';

/**
 * private_key_jwt client authentication (RFC 7523 §2.2, API.md §7): a client registered with its public
 * keys through the admin API, authenticating with openid-client as an integrator's code would, and the
 * assertions the token endpoint refuses.
 */
describe('private_key_jwt client authentication', () => {
  let server: AuthTestServer;
  let clientId: string;
  let signing: { privateKey: CryptoKey; jwk: JWK };
  const admin = () => ({ authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' });

  async function keyPair(kid: string): Promise<{ privateKey: CryptoKey; jwk: JWK }> {
    const { privateKey, publicKey } = await generateKeyPair('ES256');
    return { privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' } };
  }

  async function registerKeyedClient(jwks: { keys: JWK[] }): Promise<Response> {
    const organization = (await (
      await fetch(`${server.url}/admin/organizations`, {
        method: 'POST',
        headers: admin(),
        body: JSON.stringify({ name: 'Keyed' }),
      })
    ).json()) as { results: { id: number } };
    return fetch(`${server.url}/admin/organizations/${organization.results.id}/clients`, {
      method: 'POST',
      headers: admin(),
      body: JSON.stringify({ name: 'Keyed integration', scopes: ['read', 'write'], jwks }),
    });
  }

  beforeAll(async () => {
    server = await startAuthTestServer();
    signing = await keyPair('key-1');
    const registered = await registerKeyedClient({ keys: [signing.jwk] });
    expect(registered.status).toBe(201);
    const body = (await registered.json()) as { results: Record<string, unknown> };
    expect(body.results).not.toHaveProperty('client_secret');
    expect(body.results.jwks).toEqual({ keys: [signing.jwk] });
    clientId = body.results.client_id as string;
  });
  afterAll(async () => {
    await server.close();
  });

  async function configuration(key: CryptoKey, kid: string): Promise<oidc.Configuration> {
    return oidc.discovery(new URL(server.issuer), clientId, undefined, oidc.PrivateKeyJwt({ key, kid }), {
      algorithm: 'oauth2',
      execute: [oidc.allowInsecureRequests],
    });
  }

  /** An assertion as RFC 7523 §3 has it, each claim overridable. */
  function assertion(claims: Record<string, unknown> = {}, key = signing.privateKey, kid = 'key-1') {
    const now = Math.floor(server.clock().getTime() / 1000);
    return new SignJWT({
      iss: clientId,
      sub: clientId,
      aud: server.issuer,
      jti: randomUUID(),
      iat: now,
      exp: now + 60,
      ...claims,
    })
      .setProtectedHeader({ alg: 'ES256', kid })
      .sign(key);
  }

  const tokenRequest = (clientAssertion: string, extra: Record<string, string> = {}) =>
    server.postForm('/oauth/token', {
      grant_type: 'client_credentials',
      client_assertion_type: JWT_BEARER,
      client_assertion: clientAssertion,
      ...extra,
    });

  async function refusal(response: Response): Promise<string> {
    expect(response.status).toBe(401);
    const body = (await response.json()) as { error: string; error_description: string };
    expect(body.error).toBe('invalid_client');
    return body.error_description;
  }

  it('is advertised in the metadata, with the signing algorithms', async () => {
    const metadata = (await (
      await fetch(`${server.url}/.well-known/oauth-authorization-server`)
    ).json()) as Record<string, string[]>;
    expect(metadata.token_endpoint_auth_methods_supported).toContain('private_key_jwt');
    expect(metadata.token_endpoint_auth_signing_alg_values_supported).toContain('ES256');
  });

  it('issues tokens to openid-client authenticating with its private key, and introspects them', async () => {
    const config = await configuration(signing.privateKey, 'key-1');
    const tokens = await oidc.clientCredentialsGrant(config, { scope: 'read' });
    expect(tokens.token_type).toBe('bearer');
    expect(tokens.scope).toBe('read');
    const introspection = await oidc.tokenIntrospection(config, tokens.access_token);
    expect(introspection).toMatchObject({ active: true, client_id: clientId });
    await oidc.tokenRevocation(config, tokens.access_token);
    expect((await oidc.tokenIntrospection(config, tokens.access_token)).active).toBe(false);
  });

  it('accepts the token endpoint as the audience too', async () => {
    const response = await tokenRequest(await assertion({ aud: `${server.issuer}/oauth/token` }));
    expect(response.status).toBe(200);
  });

  it('refuses an assertion presented a second time (jti replay)', async () => {
    const once = await assertion();
    expect((await tokenRequest(once)).status).toBe(200);
    expect(await refusal(await tokenRequest(once))).toBe('The client assertion was used before');
  });

  it('refuses assertions signed by another key, for another audience, expired, made in the future, or living too long', async () => {
    const stranger = await keyPair('key-1');
    expect(await refusal(await tokenRequest(await assertion({}, stranger.privateKey)))).toBe(
      'The client assertion is invalid: signature',
    );
    expect(await refusal(await tokenRequest(await assertion({}, stranger.privateKey, 'other')))).toBe(
      'The client assertion is invalid: signed by no key of the client',
    );
    expect(await refusal(await tokenRequest(await assertion({ aud: 'https://elsewhere.example' })))).toBe(
      'The client assertion is invalid: aud (check_failed)',
    );
    expect(await refusal(await tokenRequest(await assertion({ iss: 'someone-else' })))).toBe(
      'The client assertion is invalid: iss (check_failed)',
    );
    const past = Math.floor(server.clock().getTime() / 1000) - 600;
    expect(await refusal(await tokenRequest(await assertion({ iat: past, exp: past + 60 })))).toBe(
      'The client assertion is invalid: expired',
    );
    // Issued 10 minutes from now (and expiring in 60 s): far beyond the 30 s of clock skew allowed.
    const ahead = Math.floor(server.clock().getTime() / 1000) + 600;
    expect(await refusal(await tokenRequest(await assertion({ iat: ahead })))).toBe(
      'The client assertion is invalid: iat (in the future)',
    );
    const later = Math.floor(server.clock().getTime() / 1000) + 3600;
    expect(await refusal(await tokenRequest(await assertion({ exp: later })))).toBe(
      'The client assertion must expire within 300 s',
    );
    expect(await refusal(await tokenRequest('not-a-jwt'))).toBe('The client assertion is not a JWT');
  });

  it('refuses a client secret for a client registered with keys, and an assertion for a client with a secret', async () => {
    expect(
      await refusal(
        await server.postForm('/oauth/token', {
          grant_type: 'client_credentials',
          client_id: clientId,
          client_secret: 'anything',
        }),
      ),
    ).toBe('Client authentication failed');
    const withSecret = await server.registerClient();
    const theirs = await new SignJWT({
      iss: withSecret.client_id,
      sub: withSecret.client_id,
      aud: server.issuer,
      jti: randomUUID(),
      exp: Math.floor(server.clock().getTime() / 1000) + 60,
    })
      .setProtectedHeader({ alg: 'ES256', kid: 'key-1' })
      .sign(signing.privateKey);
    expect(await refusal(await tokenRequest(theirs))).toBe('Client authentication failed');
    const rotate = await fetch(`${server.url}/admin/clients/${clientId}/rotate_secret`, {
      method: 'POST',
      headers: admin(),
      body: '{}',
    });
    expect(rotate.status).toBe(409);
  });

  it('follows the client’s key rotation through the admin API', async () => {
    const next = await keyPair('key-2');
    const replace = (keys: JWK[]) =>
      fetch(`${server.url}/admin/clients/${clientId}/jwks`, {
        method: 'PUT',
        headers: admin(),
        body: JSON.stringify({ jwks: { keys } }),
      });
    expect((await replace([signing.jwk, next.jwk])).status).toBe(200);
    const config = await configuration(next.privateKey, 'key-2');
    await expect(oidc.clientCredentialsGrant(config, { scope: 'read' })).resolves.toHaveProperty(
      'access_token',
    );
    expect((await replace([next.jwk])).status).toBe(200);
    expect(await refusal(await tokenRequest(await assertion()))).toBe(
      'The client assertion is invalid: signed by no key of the client',
    );
    const privateJwk = { ...signing.jwk, d: 'c2VjcmV0' };
    const refused = await replace([privateJwk]);
    expect(refused.status).toBe(422);
    expect(await refused.json()).toEqual({
      count: 0,
      results: null,
      errors: { 'jwks.keys[0]': ['must be a public key'] },
    });
    signing = next;
  });
});
