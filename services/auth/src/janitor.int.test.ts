import { randomUUID } from 'node:crypto';
import type { RegisteredClient } from './tenants.js';
import { startAuthTestServer, type AuthTestServer } from './testing/auth-test-server.js';

const HOUR = 3600_000;
const DAY = 24 * HOUR;

/** API.md §7: expired codes, grants and refresh tokens are purged; storage does not grow with tokens. */
describe('the janitor', () => {
  let server: AuthTestServer;
  let client: RegisteredClient;

  beforeAll(async () => {
    server = await startAuthTestServer();
    client = await server.registerClient();
  });
  afterAll(() => server.close());

  const rows = async (): Promise<Record<string, number>> => {
    const { rows: counted } = await server.pool.query<Record<string, number>>(
      `SELECT (SELECT count(*)::int FROM auth.grants) AS grants,
              (SELECT count(*)::int FROM auth.refresh_tokens) AS refresh_tokens,
              (SELECT count(*)::int FROM auth.authorization_codes) AS authorization_codes,
              (SELECT count(*)::int FROM auth.revoked_access_tokens) AS revoked_access_tokens`,
    );
    return counted[0]!;
  };
  const refresh = (refreshToken: string) =>
    server.postForm('/oauth/token', {
      grant_type: 'refresh_token',
      refresh_token: refreshToken,
      client_id: client.client_id,
      client_secret: client.client_secret,
    });

  it('keeps what can still be used, and purges it once expired', async () => {
    const first = await server.codeGrant(client);
    const rotated = (await (await refresh(first.refresh_token)).json()) as { refresh_token: string };
    const unredeemed = await fetch(
      `${server.url}/oauth/authorize?response_type=code&client_id=${client.client_id}`,
      { redirect: 'manual' },
    );
    expect(unredeemed.status).toBe(302);
    const before = await rows();
    expect(before).toMatchObject({ grants: 1, refresh_tokens: 2, authorization_codes: 2 });

    // The unredeemed code expires after 10 minutes; the redeemed one stays while its grant does, so that
    // presenting it again still revokes the grant.
    server.clock.advance(11 * 60_000);
    expect(await server.auth.janitor.purge()).toEqual({
      refresh_tokens: 0,
      grants: 0,
      authorization_codes: 1,
      revoked_access_tokens: 0,
      client_assertions: 0,
    });
    expect((await refresh(rotated.refresh_token)).status).toBe(200);

    // 30 days on, every refresh token has expired: the grant goes with its last one, then its code.
    server.clock.advance(31 * DAY);
    expect(await server.auth.janitor.purge()).toEqual({
      refresh_tokens: 3,
      grants: 1,
      authorization_codes: 1,
      revoked_access_tokens: 0,
      client_assertions: 0,
    });
    expect(await rows()).toEqual({
      grants: 0,
      refresh_tokens: 0,
      authorization_codes: 0,
      revoked_access_tokens: 0,
    });
  });

  it('purges a revoked grant once its access tokens have expired', async () => {
    const tokens = await server.codeGrant(client);
    await server.postForm('/oauth/revoke', {
      token: tokens.refresh_token,
      client_id: client.client_id,
      client_secret: client.client_secret,
    });
    await server.auth.janitor.purge();
    expect(await rows()).toMatchObject({ grants: 1, refresh_tokens: 1 });
    server.clock.advance(3 * HOUR + 1_000);
    await server.auth.janitor.purge();
    expect(await rows()).toMatchObject({ grants: 0, refresh_tokens: 0, authorization_codes: 0 });
  });

  it('forgets a revoked client-credentials token five minutes after it expired', async () => {
    const { access_token: token } = (await (
      await server.postForm('/oauth/token', {
        grant_type: 'client_credentials',
        client_id: client.client_id,
        client_secret: client.client_secret,
      })
    ).json()) as { access_token: string };
    await server.postForm('/oauth/revoke', {
      token,
      client_id: client.client_id,
      client_secret: client.client_secret,
    });
    expect(await rows()).toMatchObject({ revoked_access_tokens: 1 });
    server.clock.advance(3 * HOUR + 4 * 60_000);
    await server.auth.janitor.purge();
    expect(await rows()).toMatchObject({ revoked_access_tokens: 1 });
    server.clock.advance(2 * 60_000);
    await server.auth.janitor.purge();
    expect(await rows()).toMatchObject({ revoked_access_tokens: 0 });
  });

  it('purges in batches until nothing expired is left', async () => {
    const now = server.clock();
    await server.pool.query(
      `INSERT INTO auth.grants (id, client_id, organization_id, scopes, created_at)
       SELECT ('00000000-0000-4000-8000-' || lpad(i::text, 12, '0'))::uuid, $1, $2, '{read}', $3
         FROM generate_series(1, 2500) AS i`,
      [client.client_id, client.organization_id, now],
    );
    await server.pool.query(
      `INSERT INTO auth.refresh_tokens
         (id, grant_id, token_hash, scopes, access_token_id, access_token_expires_at, issued_at, expires_at, state)
       SELECT gen_random_uuid(), ('00000000-0000-4000-8000-' || lpad(i::text, 12, '0'))::uuid,
              decode(md5(i::text), 'hex'), '{read}', gen_random_uuid(), $1, $1, $1, 'active'
         FROM generate_series(1, 2500) AS i`,
      [now],
    );
    await server.pool.query(
      'INSERT INTO auth.revoked_access_tokens (token_id, client_id, expires_at) VALUES ($1, $2, $3)',
      [randomUUID(), client.client_id, new Date(now.getTime() + HOUR)],
    );
    expect(await server.auth.janitor.purge()).toEqual({
      refresh_tokens: 2500,
      grants: 2500,
      authorization_codes: 0,
      revoked_access_tokens: 0,
      client_assertions: 0,
    });
    expect(await rows()).toMatchObject({ grants: 0, refresh_tokens: 0, revoked_access_tokens: 1 });
  });

  it('forgets the jti of a client assertion five minutes after it expired', async () => {
    const now = server.clock();
    const keyed = await server.pool.query<{ id: string }>(
      `INSERT INTO auth.clients (id, organization_id, name, scopes, jwks, created_at)
       VALUES ($1, $2, 'keyed', '{read}', '{"keys": []}', $3) RETURNING id`,
      [randomUUID(), client.organization_id, now],
    );
    const assertion = (jti: string, expiresAt: number) =>
      server.pool.query(
        'INSERT INTO auth.client_assertions (client_id, jti, expires_at) VALUES ($1, $2, $3)',
        [keyed.rows[0]!.id, jti, new Date(expiresAt)],
      );
    await assertion('long-gone', now.getTime() - 6 * 60_000);
    await assertion('just-expired', now.getTime() - 60_000);
    await assertion('live', now.getTime() + 60_000);
    expect(await server.auth.janitor.purge()).toMatchObject({ client_assertions: 1 });
    const { rows: left } = await server.pool.query<{ jti: string }>(
      'SELECT jti FROM auth.client_assertions ORDER BY jti',
    );
    expect(left.map((row) => row.jti)).toEqual(['just-expired', 'live']);
  });
});
