import { existsSync } from 'node:fs';

/**
 * The Chromium that page tests drive with playwright-core: CHROMIUM_PATH, else Debian's `chromium`
 * package (what .ci/run installs). Undefined when there is none, so that such a test is skipped and
 * says why; under CI=true a missing browser fails instead, naming what `what` needs.
 */
export function chromiumFor(what: string): string | undefined {
  const found =
    process.env.CHROMIUM_PATH ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find(existsSync);
  if (found === undefined && process.env.CI === 'true')
    throw new Error(`CI=true: ${what} needs Chromium (apt-get install chromium, or set CHROMIUM_PATH)`);
  return found;
}
