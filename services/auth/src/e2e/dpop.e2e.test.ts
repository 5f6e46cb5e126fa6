import * as oidc from 'openid-client';
import { RUN_MODES, startTestPlatform, type RunningPlatform } from '@ofp/testing';

/**
 * API.md §7: DPoP-bound tokens are checked by every service (RFC 9449 §7). openid-client sends its
 * requests to the public URL (`PUBLIC_URL`, the auth service's here) as a client in front of the
 * chart's ingress does, and its fetch routes each by path to the process that serves it, as the ingress
 * would: the proof's `htu` is the public URL, whichever process answers.
 */
describe.each(RUN_MODES)('DPoP-bound tokens at every service ($mode)', ({ mode }) => {
  let platform: RunningPlatform;
  let config: oidc.Configuration;
  let dpop: oidc.DPoPHandle;
  let token: string;

  /** Where the ingress sends a public URL's path (charts/ofp/templates/ingress.yaml). */
  function routed(url: URL): string {
    const path = `${url.pathname}${url.search}`;
    if (/^\/v2\/(webhooks|webhook_deliveries|webhook_event_types)\b/.test(url.pathname))
      return `${platform.webhooksUrl}${path}`;
    if (/^\/v2\//.test(url.pathname) && url.pathname !== '/v2/authenticate')
      return `${platform.apiUrl}${path}`;
    return `${platform.authUrl}${path}`;
  }

  beforeAll(async () => {
    platform = await startTestPlatform(mode);
    const admin = async (path: string, body: unknown) => {
      const response = await fetch(`${platform.adminUrl}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${platform.adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(response.status).toBe(201);
      return ((await response.json()) as { results: Record<string, unknown> }).results;
    };
    const organization = await admin('/admin/organizations', { name: 'Bound' });
    const client = await admin(`/admin/organizations/${String(organization.id)}/clients`, {
      name: 'Bound client',
      scopes: ['read', 'write'],
      dpop_bound_access_tokens: true,
    });
    config = await oidc.discovery(
      new URL(platform.authUrl),
      client.client_id as string,
      client.client_secret as string,
      undefined,
      { algorithm: 'oauth2', execute: [oidc.allowInsecureRequests] },
    );
    config[oidc.customFetch] = (url, options) => fetch(routed(new URL(url)), options as RequestInit);
    dpop = oidc.getDPoPHandle(config, await oidc.randomDPoPKeyPair('ES256'));
    token = (await oidc.clientCredentialsGrant(config, undefined, { DPoP: dpop })).access_token;
  }, 120_000);
  afterAll(async () => {
    await platform?.stop();
  }, 60_000);

  const dpopRequest = (path: string) =>
    oidc.fetchProtectedResource(
      config,
      token,
      new URL(`${platform.authUrl}${path}`),
      'GET',
      undefined,
      undefined,
      {
        DPoP: dpop,
      },
    );

  it('accepts the token with proofs at the api, the webhook dispatcher and the auth service', async () => {
    for (const path of ['/v2/people', '/v2/webhooks', '/v2/authenticate']) {
      const response = await dpopRequest(path);
      expect({ path, status: response.status }).toEqual({ path, status: 200 });
    }
  });

  it('refuses it as a bearer token at each of them', async () => {
    for (const path of ['/v2/people', '/v2/webhooks', '/v2/authenticate']) {
      const response = await fetch(routed(new URL(`${platform.authUrl}${path}`)), {
        headers: { authorization: `Bearer ${token}` },
      });
      expect({ path, status: response.status }).toEqual({ path, status: 401 });
      expect(response.headers.get('www-authenticate')).toMatch(/^DPoP error="invalid_token"/);
    }
  });
});
