import { manualClock } from '@ofp/testing';
import { startDispatcherHarness, type DispatcherHarness } from '../testing/dispatcher-harness.js';
import { PortalSessions } from './portal-sessions.js';

const HOOK = { url: 'https://hooks.example.test/portal', events: ['person.created'] };

/** A portal session's results, as minted. */
interface Minted {
  id: number;
  url: string;
  token: string;
  created_at: string;
  expires_at: string;
}

describe('portal sessions: the subscriber portal’s tokens', () => {
  const clock = manualClock();
  let harness: DispatcherHarness;

  beforeAll(async () => {
    harness = await startDispatcherHarness({ clock, start: false });
  });
  afterAll(async () => {
    await harness?.close();
  });

  /** Mints a session for `orgId` with an `operations` token. */
  async function mint(orgId: number, body: unknown = {}): Promise<Minted> {
    const response = await harness.request('POST', '/webhooks/portal_sessions', {
      orgId,
      scopes: ['operations'],
      body,
    });
    expect(response.status).toBe(201);
    return response.body.results as Minted;
  }

  /** A call with the portal token instead of an OAuth token. */
  const withToken = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });

  it('is minted by an operations token only: a link to the portal with the token in its fragment, for an hour', async () => {
    const refused = await harness.request('POST', '/webhooks/portal_sessions', {
      orgId: 1,
      scopes: ['read', 'write'],
      body: {},
    });
    expect(refused.status).toBe(403);

    const session = await mint(1);
    expect(session.token).toMatch(/^ofp_portal_[A-Za-z0-9_-]{43}$/);
    expect(session.url).toBe(`https://ofp.example.test/portal#token=${session.token}`);
    expect(session.created_at).toBe(clock().toISOString());
    expect(Date.parse(session.expires_at) - Date.parse(session.created_at)).toBe(3_600_000);
    // Only its hash is kept.
    const { rows } = await harness.database.pool.query('SELECT * FROM webhooks.portal_sessions');
    expect(JSON.stringify(rows)).not.toContain(session.token.slice('ofp_portal_'.length));
  });

  it("opens its organization's webhooks and deliveries, reading and changing them, and nothing of another", async () => {
    const mine = await harness.createWebhook(2, HOOK);
    const theirs = await harness.createWebhook(3, HOOK);
    const { token } = await mint(2);

    const listed = await harness.request('GET', '/webhooks', withToken(token));
    expect(listed.status).toBe(200);
    expect((listed.body.results as { id: number }[]).map(({ id }) => id)).toEqual([mine.id]);
    expect((await harness.request('GET', `/webhooks/${theirs.id}`, withToken(token))).status).toBe(404);
    expect(
      (
        await harness.request('PATCH', `/webhooks/${theirs.id}`, {
          ...withToken(token),
          body: { enabled: false },
        })
      ).status,
    ).toBe(404);

    const disabled = await harness.request('PATCH', `/webhooks/${mine.id}`, {
      ...withToken(token),
      body: { enabled: false },
    });
    expect(disabled.status).toBe(200);
    expect(disabled.body.results).toMatchObject({ id: mine.id, enabled: false });
    const rotated = await harness.request('POST', `/webhooks/${mine.id}/rotate_secret`, withToken(token));
    expect(rotated.status).toBe(200);
    expect((rotated.body.results as { secret: string }).secret).toMatch(/^whsec_/);
    expect((await harness.request('GET', '/webhook_deliveries', withToken(token))).status).toBe(200);
  });

  it('changes no more than the portal does: no create, delete, PUT, nor any field but enabled (API.md §7)', async () => {
    const mine = await harness.createWebhook(6, HOOK);
    const { token } = await mint(6);
    const refused = [
      await harness.request('POST', '/webhooks', { ...withToken(token), body: HOOK }),
      await harness.request('POST', '/webhooks/999999', { ...withToken(token), body: HOOK }),
      await harness.request('DELETE', `/webhooks/${mine.id}`, withToken(token)),
      await harness.request('PUT', `/webhooks/${mine.id}`, { ...withToken(token), body: { enabled: false } }),
      await harness.request('PATCH', `/webhooks/${mine.id}`, {
        ...withToken(token),
        body: { url: 'https://attacker.example.test/' },
      }),
      await harness.request('PATCH', `/webhooks/${mine.id}`, {
        ...withToken(token),
        body: { enabled: false, events: ['*'] },
      }),
    ];
    expect(refused.map(({ status }) => status)).toEqual([403, 403, 403, 403, 403, 403]);
    expect(refused[0]!.body.errors).toEqual({ base: [expect.stringContaining('write')] });
    expect(refused[4]!.body.errors).toEqual({ base: [expect.stringContaining('(url)')] });
    const unchanged = await harness.request('GET', `/webhooks/${mine.id}`, withToken(token));
    expect(unchanged.body.results).toMatchObject({
      url: HOOK.url,
      events: HOOK.events,
      enabled: true,
      version: 1,
    });
    // What the portal does still works (a disabled endpoint recovers nothing: recover first).
    const recovered = await harness.request('POST', `/webhooks/${mine.id}/recover`, {
      ...withToken(token),
      body: { since: new Date(clock().getTime() - 3_600_000).toISOString() },
    });
    expect(recovered.status).toBe(200);
    const toggled = await harness.request('PATCH', `/webhooks/${mine.id}`, {
      ...withToken(token),
      body: { enabled: false },
    });
    expect(toggled.status).toBe(200);
  });

  it('cannot mint another session, so that holding one never extends it', async () => {
    const { token } = await mint(4);
    const again = await harness.request('POST', '/webhooks/portal_sessions', {
      ...withToken(token),
      body: {},
    });
    expect(again.status).toBe(403);
    expect(again.body.errors).toEqual({ base: [expect.stringContaining('operations')] });
  });

  it('expires: refused with 401 from its expiry on, and purged', async () => {
    const session = await mint(5, { expires_in: 300 });
    expect(Date.parse(session.expires_at) - Date.parse(session.created_at)).toBe(300_000);
    expect((await harness.request('GET', '/webhooks', { ...withToken(session.token) })).status).toBe(200);

    clock.advance(300_000);
    const expired = await harness.request('GET', '/webhooks', withToken(session.token));
    expect(expired.status).toBe(401);
    expect(expired.headers.get('www-authenticate')).toBe(
      'Bearer error="invalid_token", error_description="The portal session has expired: open the portal again"',
    );
    const count = async () =>
      Number(
        (
          await harness.database.pool.query<{ n: string }>(
            'SELECT count(*) AS n FROM webhooks.portal_sessions WHERE id = $1',
            [session.id],
          )
        ).rows[0]!.n,
      );
    expect(await count()).toBe(1);
    await new PortalSessions(harness.database.pool, clock).purgeExpired(clock());
    expect(await count()).toBe(0);
  });

  it('refuses a portal token it never minted', async () => {
    const forged = `ofp_portal_${'A'.repeat(43)}`;
    const refused = await harness.request('GET', '/webhooks', withToken(forged));
    expect(refused.status).toBe(401);
    expect(refused.body.errors).toEqual({ base: ['The portal session is unknown'] });
  });

  it('lasts no longer than the token that minted it, within 60 s to 24 h, and says which field is wrong', async () => {
    // The harness's test tokens expire an hour after they are made (on the machine's clock).
    const capped = await mint(6, { expires_in: 86_400 });
    expect(Date.parse(capped.expires_at)).toBeLessThanOrEqual(Date.now() + 3_600_000);

    for (const [body, field] of [
      [{ expires_in: 59 }, 'expires_in'],
      [{ expires_in: 86_401 }, 'expires_in'],
      [{ expires_in: '3600' }, 'expires_in'],
      [{ lifetime: 60 }, 'base'],
    ] as const) {
      const refused = await harness.request('POST', '/webhooks/portal_sessions', {
        orgId: 6,
        scopes: ['operations'],
        body,
      });
      expect({ body, status: refused.status, fields: Object.keys(refused.body.errors ?? {}) }).toEqual({
        body,
        status: 422,
        fields: [field],
      });
    }
  });
});
