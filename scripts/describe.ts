/**
 * Writes the published descriptions into the repository (API.md §9, §11): `docs/openapi.json` and
 * `docs/asyncapi.json`, as a standalone instance with the default settings serves them, formatted
 * with the repository's Prettier settings; and the settings table of `docs/configuration.md`, from
 * the config schema. A test fails while the committed files differ from what the code generates, so
 * run this after changing a route, a model, an event type or a setting:
 *
 *   npm run describe
 */
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { format, resolveConfig } from 'prettier';
import { DESCRIPTION_FILES, SETTINGS_PAGE, repositoryDescriptions, withSettingsTable } from '@ofp/platform';

const root = fileURLToPath(new URL('..', import.meta.url));
const descriptions = repositoryDescriptions();
for (const [name, path] of Object.entries(DESCRIPTION_FILES)) {
  const file = `${root}${path}`;
  const text = await format(JSON.stringify(descriptions[name as keyof typeof DESCRIPTION_FILES]), {
    ...(await resolveConfig(file)),
    filepath: file,
  });
  await writeFile(file, text);
  console.log(`wrote ${path}`);
}
const settingsPage = `${root}${SETTINGS_PAGE}`;
await writeFile(settingsPage, withSettingsTable(await readFile(settingsPage, 'utf8')));
console.log(`wrote ${SETTINGS_PAGE}`);
