import { MODELS } from '@ofp/models';
import { chromiumSuite, startTestPlatform, type RunningPlatform } from '@ofp/testing';

chromiumSuite('GET /docs in Chromium', (chromium) => {
  let platform: RunningPlatform;
  beforeAll(async () => {
    platform = await startTestPlatform('standalone');
  }, 120_000);
  afterAll(async () => {
    await platform?.stop();
  });

  it("renders every model's search and the webhooks, loading nothing from elsewhere", async () => {
    const { page, problems } = await chromium.watchedPage(new URL(platform.apiUrl).origin);
    await page.goto(`${platform.apiUrl}/docs`);
    // Redoc renders each operation as a section headed by its summary, the webhooks too.
    const heading = (name: string) => page.locator('h2', { hasText: name });
    await heading('Search people').first().waitFor({ timeout: 60_000 });
    const summaries = [
      ...[...Object.values(MODELS).map((model) => model.name), 'webhooks', 'webhook_deliveries'].map(
        (name) => `Search ${name.replace(/_/g, ' ')}`,
      ),
      'person.created',
      'order.cancelled',
      'webhook.test',
    ];
    const missing: string[] = [];
    for (const summary of summaries) if (!(await heading(summary).first().isVisible())) missing.push(summary);
    expect(missing).toEqual([]);
    expect(await page.getByText('Webhook events', { exact: true }).count()).toBeGreaterThan(0);
    expect(await problems()).toEqual({ elsewhere: [], violations: [], errors: [] });
    // Redoc's attribution stays, without its CDN logo.
    expect(await page.getByText('API docs by Redocly').count()).toBe(1);
  }, 90_000);

  it('has an icon that the browser renders', async () => {
    const html = await (await fetch(`${platform.apiUrl}/docs`)).text();
    expect(html).toContain('<link rel="icon" href="/favicon.ico" type="image/svg+xml">');
    const page = await chromium.newPage();
    const icon = await page.goto(`${platform.apiUrl}/favicon.ico`);
    expect(icon?.status()).toBe(200);
    // The page's own script context, where the DOM's Image is (this file compiles without the DOM's types).
    const size = await page.evaluate<number[]>(
      `(async () => { const image = new Image(); image.src = '/favicon.ico'; await image.decode(); return [image.naturalWidth, image.naturalHeight]; })()`,
    );
    expect(size).toEqual([32, 32]);
  }, 60_000);
});
