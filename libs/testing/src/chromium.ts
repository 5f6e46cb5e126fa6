import { existsSync } from 'node:fs';
import { chromium, type Browser, type Page } from 'playwright-core';

/**
 * The Chromium that page tests drive with playwright-core: CHROMIUM_PATH, else Debian's `chromium`
 * package (what .ci/run installs). Undefined when there is none, so that such a test is skipped and
 * says why; under CI=true a missing browser fails instead, naming what `what` needs.
 */
function chromiumFor(what: string): string | undefined {
  const found =
    process.env.CHROMIUM_PATH ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find(existsSync);
  if (found === undefined && process.env.CI === 'true')
    throw new Error(`CI=true: ${what} needs Chromium (apt-get install chromium, or set CHROMIUM_PATH)`);
  return found;
}

/** A page that refuses and notes whatever would make it less than self-contained and clean. */
export interface WatchedPage {
  readonly page: Page;
  /**
   * What went wrong on the page so far: requests to another origin (each refused), what its Content
   * Security Policy blocked (the blocked URIs), and uncaught errors. All empty on a sound page.
   */
  problems(): Promise<{ elsewhere: string[]; violations: string[]; errors: string[] }>;
}

/** The browser of a {@link chromiumSuite}, launched before its tests and closed after them. */
export interface SuiteBrowser {
  newPage(): Promise<Page>;
  /**
   * A new page on which every request to an origin other than `origin` is refused and noted (a
   * `data:` or `blob:` URL is the page's own), and Content Security Policy violations and page errors
   * are recorded from the first script on; see {@link WatchedPage.problems}.
   */
  watchedPage(origin: string): Promise<WatchedPage>;
}

/**
 * A suite of tests of pages in Chromium (`name`: what is tested, as the suite's title): the browser
 * found by {@link chromiumFor} is launched before the suite's tests and closed after them. Without
 * Chromium the suite is skipped with a title that says how to get one; under CI=true it fails.
 */
export function chromiumSuite(name: string, tests: (browser: SuiteBrowser) => void): void {
  const executablePath = chromiumFor(name);
  let launched: Browser | undefined;
  const browser = (): Browser => {
    if (!launched) throw new Error(`${name}: Chromium is not launched`);
    return launched;
  };
  const suiteBrowser: SuiteBrowser = {
    newPage: () => browser().newPage(),
    watchedPage: (origin) => watchedPage(browser(), origin),
  };
  if (executablePath === undefined) {
    describe.skip(`${name}: skipped, no Chromium here (apt-get install chromium, or set CHROMIUM_PATH)`, () =>
      tests(suiteBrowser));
    return;
  }
  describe(name, () => {
    beforeAll(async () => {
      // As root (CI) Chromium's sandbox cannot start; the pages tested are the platform's own.
      launched = await chromium.launch({ executablePath, args: ['--no-sandbox'] });
    }, 60_000);
    afterAll(async () => {
      await launched?.close();
    });
    tests(suiteBrowser);
  });
}

async function watchedPage(browser: Browser, origin: string): Promise<WatchedPage> {
  const page = await browser.newPage();
  // A request the page's policy blocks never reaches the route below: the page reports it.
  await page.addInitScript(
    "window.violations = []; document.addEventListener('securitypolicyviolation', (event) => window.violations.push(event.blockedURI));",
  );
  const errors: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  const elsewhere: string[] = [];
  await page.route('**/*', (route) => {
    const url = route.request().url();
    if (new URL(url).origin === origin || url.startsWith('data:') || url.startsWith('blob:'))
      return route.continue();
    elsewhere.push(url);
    return route.abort();
  });
  return {
    page,
    problems: async () => ({
      elsewhere: [...elsewhere],
      violations: await page.evaluate<string[]>('window.violations'),
      errors: [...errors],
    }),
  };
}
