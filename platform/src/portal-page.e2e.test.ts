import type { Page } from 'playwright-core';
import {
  chromiumSuite,
  createIntegrator,
  startTestPlatform,
  startWebhookReceiver,
  type Integrator,
  type RunningPlatform,
  type WebhookReceiver,
} from '@ofp/testing';

/**
 * The subscriber portal (docs/api-notes.md "Subscriber portal") as its user meets it: a link minted
 * through the API, opened in Chromium, and every action clicked, each checked in what the receiver
 * got and what the API answers afterwards.
 */
chromiumSuite('GET /portal in Chromium', (chromium) => {
  let platform: RunningPlatform;
  let integrator: Integrator;
  let receiver: WebhookReceiver;
  let secrets: string[] = [];
  let webhook: { id: number; url: string; secret: string };

  beforeAll(async () => {
    platform = await startTestPlatform('standalone', { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
    integrator = await createIntegrator(platform, { name: 'Portal subscriber' });
    receiver = await startWebhookReceiver({ secrets: () => secrets });
    const created = await integrator.request<{ id: number; url: string; secret: string }>(
      'POST',
      '/v2/webhooks',
      { body: { url: receiver.url, events: ['person.created'] } },
    );
    webhook = created.body.results;
    secrets = [webhook.secret];
  }, 120_000);
  afterAll(async () => {
    await receiver?.close();
    await platform?.stop();
  });

  /** A portal session's link, minted with the integrator's `operations` token. */
  async function mint(): Promise<{ url: string; token: string }> {
    const minted = await integrator.request<{ url: string; token: string }>(
      'POST',
      '/v2/webhooks/portal_sessions',
      { body: { expires_in: 900 } },
    );
    expect(minted.status).toBe(201);
    return minted.body.results;
  }

  /** The portal opened from `url`, watched as /docs is (nothing from elsewhere, no violation, no error). */
  async function open(url: string) {
    const watched = await chromium.watchedPage(new URL(url).origin);
    await watched.page.goto(url);
    await watched.page.getByRole('heading', { name: 'Endpoints' }).waitFor({ state: 'visible' });
    return watched;
  }

  const endpointRow = (page: Page) => page.locator(`#endpoints tr[data-webhook="${webhook.id}"]`);

  it("shows the organization's endpoints, event types and deliveries with their attempts and payload; retries one", async () => {
    const person = await integrator.request<{ id: number }>('POST', '/v2/people', {
      body: { last_name: 'Lovelace' },
    });
    await receiver.waitFor((received) => received.length === 1);
    const { url } = await mint();
    const { page, problems } = await open(url);
    // The token leaves the address bar once read.
    expect(page.url()).not.toContain('token');

    await expect(endpointRow(page).textContent()).resolves.toContain(receiver.url);
    await expect(
      page.locator('#event-types dt').getByText('order.cancelled', { exact: true }).count(),
    ).resolves.toBe(1);
    const delivery = page.locator('#deliveries tbody tr', { hasText: 'person.created' });
    await delivery.click();
    const heading = page.locator('#delivery-heading');
    await heading.filter({ hasText: '1 attempt' }).waitFor();
    await expect(page.locator('#request').textContent()).resolves.toContain(
      `"id": ${person.body.results.id}`,
    );
    await expect(page.locator('#request').textContent()).resolves.toContain('"last_name": "Lovelace"');
    await expect(page.locator('#attempts tbody tr').count()).resolves.toBe(1);
    await expect(page.locator('#attempts tbody tr').first().textContent()).resolves.toContain('204');

    await page.getByRole('button', { name: 'Retry' }).click();
    await heading.filter({ hasText: 'succeeded, 2 attempts' }).waitFor({ timeout: 30_000 });
    await expect(page.locator('#attempts tbody tr').count()).resolves.toBe(2);
    // Sent again, with the same webhook-id.
    expect(receiver.received.map(({ id, verified }) => ({ id, verified }))).toEqual([
      { id: receiver.received[0]!.id, verified: true },
      { id: receiver.received[0]!.id, verified: true },
    ]);

    expect(await problems()).toEqual({ elsewhere: [], violations: [], errors: [] });
  }, 90_000);

  it('rotates the secret, sends a test event signed with the new one, disables and enables the endpoint, recovers', async () => {
    const { page, problems } = await open((await mint()).url);

    await endpointRow(page).getByRole('button', { name: 'Rotate secret' }).click();
    const shown = (await page.locator('#secret').filter({ hasText: 'whsec_' }).textContent()) ?? '';
    const secret = /whsec_[A-Za-z0-9+/=]+/.exec(shown)?.[0];
    expect(secret).toBeDefined();
    // The receiver trusts the new secret alone: the test event must verify with it.
    secrets = [secret!];
    const before = receiver.received.length;
    await endpointRow(page).getByRole('button', { name: 'Send test event' }).click();
    await receiver.waitFor((received) => received.length > before);
    expect(receiver.received.at(-1)).toMatchObject({ verified: true, payload: { type: 'webhook.test' } });
    await page.locator('#deliveries tbody tr', { hasText: 'webhook.test' }).first().waitFor();

    await endpointRow(page).getByRole('button', { name: 'Disable' }).click();
    await endpointRow(page).getByRole('button', { name: 'Enable' }).waitFor();
    const disabled = await integrator.request<{ enabled: boolean }>('GET', `/v2/webhooks/${webhook.id}`);
    expect(disabled.body.results.enabled).toBe(false);
    await endpointRow(page).getByRole('button', { name: 'Enable' }).click();
    await endpointRow(page).getByRole('button', { name: 'Disable' }).waitFor();
    const enabled = await integrator.request<{ enabled: boolean }>('GET', `/v2/webhooks/${webhook.id}`);
    expect(enabled.body.results.enabled).toBe(true);

    // Nothing failed for good here: recover answers that it queued none.
    await page.getByRole('button', { name: 'Recover' }).click();
    await page.getByRole('status').filter({ hasText: 'Recovered 0 failed deliveries' }).waitFor();
    expect(await problems()).toEqual({ elsewhere: [], violations: [], errors: [] });
  }, 90_000);

  it("opens nothing but the organization's webhooks, and only while it lasts", async () => {
    const { token } = await mint();
    const call = (path: string) =>
      fetch(`${platform.apiUrl}${path}`, { headers: { authorization: `Bearer ${token}` } });
    expect((await call('/v2/webhooks')).status).toBe(200);
    expect((await call('/v2/people')).status).toBe(401);
    expect((await call('/v2/authenticate')).status).toBe(401);

    // Without a session the page says how to get one.
    const page = await chromium.newPage();
    await page.goto(`${platform.apiUrl}/portal`);
    await page.getByRole('status').filter({ hasText: 'portal_sessions' }).waitFor();
    expect(await page.locator('main').isHidden()).toBe(true);
  }, 60_000);
});
