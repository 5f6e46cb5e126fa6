import { chromium, type Browser } from 'playwright-core';
import { MODELS } from '@ofp/models';
import { chromiumFor, startTestPlatform, type RunningPlatform } from '@ofp/testing';

const CHROMIUM = chromiumFor('the reference page');

const suite = CHROMIUM === undefined ? describe.skip : describe;

suite(
  CHROMIUM === undefined
    ? 'GET /docs in Chromium: skipped, no Chromium here (apt-get install chromium, or set CHROMIUM_PATH)'
    : 'GET /docs in Chromium',
  () => {
    let platform: RunningPlatform;
    let browser: Browser;
    beforeAll(async () => {
      platform = await startTestPlatform('standalone');
      // As root (CI) Chromium's sandbox cannot start; the page is the platform's own.
      browser = await chromium.launch({ executablePath: CHROMIUM!, args: ['--no-sandbox'] });
    }, 120_000);
    afterAll(async () => {
      await browser?.close();
      await platform?.stop();
    });

    it("renders every model's search and the webhooks, loading nothing from elsewhere", async () => {
      const origin = new URL(platform.apiUrl).origin;
      const page = await browser.newPage();
      // A request the page's policy blocks never reaches the route below: the page reports it.
      await page.addInitScript(
        "window.violations = []; document.addEventListener('securitypolicyviolation', (event) => window.violations.push(event.blockedURI));",
      );
      const errors: string[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      const elsewhere: string[] = [];
      // Every request the page makes is seen here; one to another origin is refused and noted.
      await page.route('**/*', (route) => {
        const url = route.request().url();
        if (new URL(url).origin === origin || url.startsWith('data:') || url.startsWith('blob:'))
          return route.continue();
        elsewhere.push(url);
        return route.abort();
      });
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
      for (const summary of summaries)
        if (!(await heading(summary).first().isVisible())) missing.push(summary);
      expect(missing).toEqual([]);
      expect(await page.getByText('Webhook events', { exact: true }).count()).toBeGreaterThan(0);
      expect(elsewhere).toEqual([]);
      expect(await page.evaluate('window.violations')).toEqual([]);
      expect(errors).toEqual([]);
      // Redoc's attribution stays, without its CDN logo.
      expect(await page.getByText('API docs by Redocly').count()).toBe(1);
    }, 90_000);

    it('has an icon that the browser renders', async () => {
      const html = await (await fetch(`${platform.apiUrl}/docs`)).text();
      expect(html).toContain('<link rel="icon" href="/favicon.ico" type="image/svg+xml">');
      const page = await browser.newPage();
      const icon = await page.goto(`${platform.apiUrl}/favicon.ico`);
      expect(icon?.status()).toBe(200);
      // The page's own script context, where the DOM's Image is (this file compiles without the DOM's types).
      const size = await page.evaluate<number[]>(
        `(async () => { const image = new Image(); image.src = '/favicon.ico'; await image.decode(); return [image.naturalWidth, image.naturalHeight]; })()`,
      );
      expect(size).toEqual([32, 32]);
    }, 60_000);
  },
);
