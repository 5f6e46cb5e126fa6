// @runs-alone: a revoked token refused within 5 s at every service, timed
import {
  createIntegrator,
  RUN_MODES,
  startTestPlatform,
  type Integrator,
  type RunningPlatform,
} from '@ofp/testing';

/** API.md §7: a revoked grant's access tokens fail at every service within 5 seconds. */
describe.each(RUN_MODES)('revocation reaches the api ($mode)', ({ mode }) => {
  let platform: RunningPlatform;

  beforeAll(async () => {
    platform = await startTestPlatform(mode);
  }, 120_000);
  /**
   * Revokes the integrator's access token (RFC 7009, client_secret_basic), then sends `ask` every 100 ms
   * until it is no longer answered 200, for at most 10 s: the last status and how long that took.
   */
  async function refusedAfterRevoking(
    integrator: Integrator,
    ask: () => Promise<{ status: number }>,
  ): Promise<{ status: number; ms: number }> {
    const revoked = await fetch(`${platform.authUrl}/oauth/revoke`, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`${integrator.clientId}:${integrator.clientSecret}`).toString('base64')}`,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams({ token: integrator.accessToken }),
    });
    expect(revoked.status).toBe(200);
    const begun = Date.now();
    let status = 200;
    while (status === 200 && Date.now() - begun < 10_000) {
      status = (await ask()).status;
      if (status === 200) await new Promise((r) => setTimeout(r, 100));
    }
    return { status, ms: Date.now() - begun };
  }

  afterAll(async () => {
    await platform?.stop();
  }, 60_000);

  it('refuses a revoked token at the api within 5 s', async () => {
    const integrator = await createIntegrator(platform, { name: 'Revoked' });
    expect((await integrator.request('GET', '/v2/people')).status).toBe(200);
    const refused = await refusedAfterRevoking(integrator, () => integrator.request('GET', '/v2/people'));
    expect(refused.status).toBe(401);
    expect(refused.ms).toBeLessThan(5_000);
  }, 30_000);

  it('ends a portal session with the token that minted it, within 5 s (RFC 7009)', async () => {
    const integrator = await createIntegrator(platform, { name: 'Portal minter' });
    const minted = await integrator.request<{ token: string }>('POST', '/v2/webhooks/portal_sessions', {
      body: {},
    });
    expect(minted.status).toBe(201);
    const portal = { headers: { authorization: `Bearer ${minted.body.results.token}` } };
    expect((await integrator.request('GET', '/v2/webhooks', portal)).status).toBe(200);
    const refused = await refusedAfterRevoking(integrator, () =>
      integrator.request('GET', '/v2/webhooks', portal),
    );
    expect(refused.status).toBe(401);
    expect(refused.ms).toBeLessThan(5_000);
  }, 30_000);
});
