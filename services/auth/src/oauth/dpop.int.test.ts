import { createHash, randomUUID } from 'node:crypto';
import { calculateJwkThumbprint, decodeJwt, exportJWK, SignJWT } from 'jose';
import * as oidc from 'openid-client';
import type { RegisteredClient } from '../tenants.js';
import { startAuthTestServer, TEST_REDIRECT_URI, type AuthTestServer } from '../testing/auth-test-server.js';

/**
 * DPoP (RFC 9449, API.md §7) at the token endpoint: a client registered to require it, openid-client's
 * DPoP support end to end (client credentials, the code flow, refresh), the tokens bound to the proof's
 * key, and the proofs the endpoint refuses.
 */
/** openid-client configured for a client by RFC 8414 discovery (plain http is fine on loopback in a test). */
function discover(server: AuthTestServer, client: RegisteredClient): Promise<oidc.Configuration> {
  return oidc.discovery(new URL(server.issuer), client.client_id, client.client_secret, undefined, {
    algorithm: 'oauth2',
    execute: [oidc.allowInsecureRequests],
  });
}

describe('DPoP at the token endpoint', () => {
  let server: AuthTestServer;
  let registered: RegisteredClient;
  let config: oidc.Configuration;
  let keys: oidc.CryptoKeyPair;
  let dpop: oidc.DPoPHandle;
  let jkt: string;

  beforeAll(async () => {
    server = await startAuthTestServer();
    registered = await server.registerClient({ dpopBoundAccessTokens: true });
    expect(registered).toMatchObject({ dpop_bound_access_tokens: true });
    config = await discover(server, registered);
    keys = await oidc.randomDPoPKeyPair('ES256');
    dpop = oidc.getDPoPHandle(config, keys);
    jkt = await calculateJwkThumbprint(await exportJWK(keys.publicKey), 'sha256');
  });
  afterAll(() => server.close());

  const tokenUrl = () => `${server.issuer}/oauth/token`;

  /** A proof made by hand for the token endpoint, each claim and header overridable. */
  async function proof(claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}) {
    return new SignJWT({
      jti: randomUUID(),
      htm: 'POST',
      htu: tokenUrl(),
      iat: Math.floor(server.clock().getTime() / 1000),
      ...claims,
    })
      .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: await exportJWK(keys.publicKey), ...header })
      .sign(keys.privateKey);
  }

  const clientCredentials = (headers: Record<string, string> = {}) =>
    server.postForm(
      '/oauth/token',
      {
        grant_type: 'client_credentials',
        client_id: registered.client_id,
        client_secret: registered.client_secret,
      },
      headers,
    );

  async function refusal(response: Response): Promise<string> {
    expect(response.status).toBe(400);
    const body = (await response.json()) as { error: string; error_description: string };
    expect(body.error).toBe('invalid_dpop_proof');
    return body.error_description;
  }

  it('advertises the proof algorithms in the metadata (RFC 9449 §5.1)', async () => {
    const metadata = (await (
      await fetch(`${server.url}/.well-known/oauth-authorization-server`)
    ).json()) as Record<string, string[]>;
    expect(metadata.dpop_signing_alg_values_supported).toEqual(['ES256', 'RS256', 'PS256', 'EdDSA']);
  });

  it('issues openid-client a DPoP token bound to its key (cnf.jkt), and introspection says so', async () => {
    const tokens = await oidc.clientCredentialsGrant(config, { scope: 'read' }, { DPoP: dpop });
    expect(tokens.token_type).toBe('dpop');
    expect(decodeJwt(tokens.access_token).cnf).toEqual({ jkt });
    const introspection = await oidc.tokenIntrospection(config, tokens.access_token);
    expect(introspection).toMatchObject({ active: true, token_type: 'DPoP', cnf: { jkt } });
  });

  it('binds the code flow’s access and refresh tokens; a refresh needs a proof of the same key', async () => {
    const verifier = oidc.randomPKCECodeVerifier();
    const authorization = oidc.buildAuthorizationUrl(config, {
      redirect_uri: TEST_REDIRECT_URI,
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
    });
    const redirect = await fetch(authorization, { redirect: 'manual' });
    const first = await oidc.authorizationCodeGrant(
      config,
      new URL(redirect.headers.get('location')!),
      { pkceCodeVerifier: verifier },
      undefined,
      { DPoP: dpop },
    );
    expect(first.token_type).toBe('dpop');
    expect(decodeJwt(first.access_token).cnf).toEqual({ jkt });

    // Whoever holds the refresh token without the key gets nothing, and changes nothing.
    const stranger = oidc.getDPoPHandle(config, await oidc.randomDPoPKeyPair('ES256'));
    await expect(
      oidc.refreshTokenGrant(config, first.refresh_token!, undefined, { DPoP: stranger }),
    ).rejects.toMatchObject({
      error: 'invalid_dpop_proof',
      error_description: 'The DPoP proof is signed by another key than the refresh token is bound to',
    });
    const withoutProof = await server.postForm('/oauth/token', {
      grant_type: 'refresh_token',
      refresh_token: first.refresh_token!,
      client_id: registered.client_id,
      client_secret: registered.client_secret,
    });
    expect(await refusal(withoutProof)).toBe(
      'This client must send a DPoP proof (RFC 9449) with its token requests',
    );

    const second = await oidc.refreshTokenGrant(config, first.refresh_token!, undefined, { DPoP: dpop });
    expect(second.token_type).toBe('dpop');
    expect(decodeJwt(second.access_token).cnf).toEqual({ jkt });
  });

  it('refuses a token request without a proof from a client registered to require one', async () => {
    expect(await refusal(await clientCredentials())).toBe(
      'This client must send a DPoP proof (RFC 9449) with its token requests',
    );
  });

  it('refuses proofs replayed, for another method or URL, stale, or not DPoP proofs', async () => {
    const once = await proof();
    expect((await clientCredentials({ DPoP: once })).status).toBe(200);
    expect(await refusal(await clientCredentials({ DPoP: once }))).toBe(
      'The DPoP proof was used before (jti)',
    );
    expect(await refusal(await clientCredentials({ DPoP: await proof({ htm: 'GET' }) }))).toBe(
      'The DPoP proof is not for this method (htm)',
    );
    expect(
      await refusal(await clientCredentials({ DPoP: await proof({ htu: `${server.issuer}/oauth/revoke` }) })),
    ).toBe('The DPoP proof is not for this URL (htu)');
    const stale = Math.floor(server.clock().getTime() / 1000) - 120;
    expect(await refusal(await clientCredentials({ DPoP: await proof({ iat: stale }) }))).toBe(
      'The DPoP proof iat is more than 60 s from the server time',
    );
    expect(await refusal(await clientCredentials({ DPoP: await proof({}, { typ: 'JWT' }) }))).toBe(
      'The DPoP proof is invalid: typ must be dpop+jwt',
    );
  });

  it('answers a grant it does not serve, or none, before it looks at the proof (RFC 6749 §5.2)', async () => {
    const form = (grant: Record<string, string>) => ({
      ...grant,
      client_id: registered.client_id,
      client_secret: registered.client_secret,
    });
    const spent = await proof();
    const password = await server.postForm(
      '/oauth/token',
      form({ grant_type: 'password', username: 'ada', password: 'secret' }),
      { DPoP: await proof({ htm: 'GET' }) },
    );
    expect(password.status).toBe(400);
    expect(await password.json()).toEqual({
      error: 'unsupported_grant_type',
      error_description: 'Supported: authorization_code, refresh_token, client_credentials',
    });
    const none = await server.postForm('/oauth/token', form({}), { DPoP: spent });
    expect(none.status).toBe(400);
    expect(await none.json()).toMatchObject({ error: 'invalid_request' });
    // Nor is a proof missing from a client that must send one the first thing said.
    const unproved = await server.postForm('/oauth/token', form({ grant_type: 'password' }));
    expect(await unproved.json()).toMatchObject({ error: 'unsupported_grant_type' });
    // A refused request spends no proof: this one still gets its token.
    expect((await clientCredentials({ DPoP: spent })).status).toBe(200);
  });

  it('binds the token of a client that does not require DPoP when it sends a proof, and not otherwise', async () => {
    const plain = await server.registerClient();
    const plainConfig = await discover(server, plain);
    const bound = await oidc.clientCredentialsGrant(plainConfig, undefined, {
      DPoP: oidc.getDPoPHandle(plainConfig, keys),
    });
    expect(bound.token_type).toBe('dpop');
    expect(decodeJwt(bound.access_token).cnf).toEqual({ jkt });
    const bearer = await oidc.clientCredentialsGrant(plainConfig);
    expect(bearer.token_type).toBe('bearer');
    expect(decodeJwt(bearer.access_token)).not.toHaveProperty('cnf');
  });

  describe('at a service (the bearer gate every service uses: RFC 9449 §7)', () => {
    const authenticateUrl = () => `${server.issuer}/v2/authenticate`;
    const algs = 'algs="ES256 RS256 PS256 EdDSA"';
    let token: string;

    beforeAll(async () => {
      token = (await oidc.clientCredentialsGrant(config, { scope: 'read' }, { DPoP: dpop })).access_token;
    });

    /** A proof for `GET /v2/authenticate` with the token, each claim overridable, signed by `signer`. */
    async function resourceProof(claims: Record<string, unknown> = {}, signer: oidc.CryptoKeyPair = keys) {
      return new SignJWT({
        jti: randomUUID(),
        htm: 'GET',
        htu: authenticateUrl(),
        iat: Math.floor(server.clock().getTime() / 1000),
        ath: createHash('sha256').update(token).digest('base64url'),
        ...claims,
      })
        .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: await exportJWK(signer.publicKey) })
        .sign(signer.privateKey);
    }

    const call = (authorization: string, proof?: string) =>
      fetch(authenticateUrl(), {
        headers: { authorization, ...(proof === undefined ? {} : { dpop: proof }) },
      });

    /** A 401 in the platform's envelope with the DPoP challenge (RFC 9449 §7.1). */
    async function refused(response: Response, code: string): Promise<string> {
      expect(response.status).toBe(401);
      const body = (await response.json()) as { errors: { base: string[] } };
      const description = body.errors.base[0]!;
      expect(response.headers.get('www-authenticate')).toBe(
        `DPoP error="${code}", error_description="${description}", ${algs}`,
      );
      return description;
    }

    it('accepts openid-client’s requests with the DPoP scheme and a proof', async () => {
      const response = await oidc.fetchProtectedResource(
        config,
        token,
        new URL(authenticateUrl()),
        'GET',
        undefined,
        undefined,
        { DPoP: dpop },
      );
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ results: { organization: { name: 'Acme' } } });
    });

    it('refuses a DPoP-bound token presented as a bearer token, and a bearer token as DPoP', async () => {
      expect(await refused(await call(`Bearer ${token}`), 'invalid_token')).toBe(
        'The access token is DPoP-bound: present it with the DPoP scheme and a proof',
      );
      const plain = await server.registerClient();
      const form = {
        grant_type: 'client_credentials',
        client_id: plain.client_id,
        client_secret: plain.client_secret,
      };
      const bearer = (
        (await (await server.postForm('/oauth/token', form)).json()) as { access_token: string }
      ).access_token;
      expect((await call(`Bearer ${bearer}`)).status).toBe(200);
      expect(await refused(await call(`DPoP ${bearer}`, await resourceProof()), 'invalid_token')).toBe(
        'The access token is not DPoP-bound: present it with the Bearer scheme',
      );
    });

    it('refuses a proof signed by another key than the token is bound to (cnf.jkt)', async () => {
      const stranger = await oidc.randomDPoPKeyPair('ES256');
      expect(
        await refused(await call(`DPoP ${token}`, await resourceProof({}, stranger)), 'invalid_dpop_proof'),
      ).toBe('The DPoP proof is signed by another key than the access token is bound to');
    });

    it('refuses no proof, a replayed proof, and proofs for another method or URL, stale, or without the token’s hash', async () => {
      const dpopCall = (proof?: string) => call(`DPoP ${token}`, proof);
      expect(await refused(await dpopCall(), 'invalid_dpop_proof')).toBe(
        'Exactly one DPoP proof header is required',
      );
      const once = await resourceProof();
      expect((await dpopCall(once)).status).toBe(200);
      expect(await refused(await dpopCall(once), 'invalid_dpop_proof')).toBe(
        'The DPoP proof was used before (jti)',
      );
      expect(await refused(await dpopCall(await resourceProof({ htm: 'POST' })), 'invalid_dpop_proof')).toBe(
        'The DPoP proof is not for this method (htm)',
      );
      expect(
        await refused(
          await dpopCall(await resourceProof({ htu: `${server.issuer}/api/v2/authenticate` })),
          'invalid_dpop_proof',
        ),
      ).toBe('The DPoP proof is not for this URL (htu)');
      const stale = Math.floor(server.clock().getTime() / 1000) - 120;
      expect(await refused(await dpopCall(await resourceProof({ iat: stale })), 'invalid_dpop_proof')).toBe(
        'The DPoP proof iat is more than 60 s from the server time',
      );
      expect(
        await refused(await dpopCall(await resourceProof({ ath: undefined })), 'invalid_dpop_proof'),
      ).toBe('The DPoP proof has no ath (the access token hash)');
      expect(
        await refused(
          await dpopCall(
            await resourceProof({ ath: createHash('sha256').update('another').digest('base64url') }),
          ),
          'invalid_dpop_proof',
        ),
      ).toBe('The DPoP proof ath is not the hash of this access token');
    });
  });
});

describe('DPoP with server nonces (RFC 9449 §8-9)', () => {
  let server: AuthTestServer;
  let config: oidc.Configuration;
  let keys: oidc.CryptoKeyPair;
  let registered: RegisteredClient;

  beforeAll(async () => {
    server = await startAuthTestServer({ dpopNonceSecret: 'the-deployment-nonce-secret-0123456789' });
    registered = await server.registerClient({ dpopBoundAccessTokens: true });
    config = await discover(server, registered);
    keys = await oidc.randomDPoPKeyPair('ES256');
  });
  afterAll(() => server.close());

  /** A proof without a nonce, for `htm` and `htu`, with `ath` when a token comes with it. */
  async function proofWithoutNonce(htm: string, htu: string, token?: string) {
    return new SignJWT({
      jti: randomUUID(),
      htm,
      htu,
      iat: Math.floor(server.clock().getTime() / 1000),
      ...(token === undefined ? {} : { ath: createHash('sha256').update(token).digest('base64url') }),
    })
      .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: await exportJWK(keys.publicKey) })
      .sign(keys.privateKey);
  }

  it('asks for a nonce at the token endpoint and at the services, and openid-client follows', async () => {
    const tokenRequest = await server.postForm(
      '/oauth/token',
      {
        grant_type: 'client_credentials',
        client_id: registered.client_id,
        client_secret: registered.client_secret,
      },
      { DPoP: await proofWithoutNonce('POST', `${server.issuer}/oauth/token`) },
    );
    expect(tokenRequest.status).toBe(400);
    expect(await tokenRequest.json()).toEqual({
      error: 'use_dpop_nonce',
      error_description: 'The DPoP proof must carry the server nonce (DPoP-Nonce)',
    });
    expect(tokenRequest.headers.get('dpop-nonce')).toMatch(/^[\w-]{43}$/);

    // openid-client sends the request again with the nonce it was given, and keeps it for the next.
    const dpop = oidc.getDPoPHandle(config, keys);
    const tokens = await oidc.clientCredentialsGrant(config, undefined, { DPoP: dpop });
    expect(tokens.token_type).toBe('dpop');
    const authenticate = `${server.issuer}/v2/authenticate`;
    const resource = await oidc.fetchProtectedResource(
      config,
      tokens.access_token,
      new URL(authenticate),
      'GET',
      undefined,
      undefined,
      { DPoP: dpop },
    );
    expect(resource.status).toBe(200);
    expect(resource.headers.get('dpop-nonce')).toBe(tokenRequest.headers.get('dpop-nonce'));

    const withoutNonce = await fetch(authenticate, {
      headers: {
        authorization: `DPoP ${tokens.access_token}`,
        dpop: await proofWithoutNonce('GET', authenticate, tokens.access_token),
      },
    });
    expect(withoutNonce.status).toBe(401);
    expect(withoutNonce.headers.get('www-authenticate')).toBe(
      'DPoP error="use_dpop_nonce", error_description="The DPoP proof must carry the server nonce (DPoP-Nonce)", algs="ES256 RS256 PS256 EdDSA"',
    );
    expect(withoutNonce.headers.get('dpop-nonce')).toBe(tokenRequest.headers.get('dpop-nonce'));
  });
});
