/**
 * Writes the published descriptions into the repository (API.md §9, §11): `docs/openapi.json` and
 * `docs/asyncapi.json`, as a standalone instance with the default settings serves them, formatted
 * with the repository's Prettier settings; and the settings table of `docs/configuration.md`, from
 * the config schema. A test fails while the committed files differ from what the code generates, so
 * run this after changing a route, a model, an event type, a setting or a module:
 *
 *   npm run describe
 *
 * With `--modules [TARGET]` it writes nothing and prints the module graph of each target (or of one):
 * its modules in start order, each with what it needs (`?`: used where present).
 *
 *   npm run describe:modules -- api
 */
import { readFile, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { format, resolveConfig } from 'prettier';
import { describeModuleGraph } from '@ofp/runtime';
import {
  DESCRIPTION_FILES,
  GENERATED_SECTIONS,
  MODULES,
  TARGETS,
  repositoryDescriptions,
  withGeneratedSections,
} from '@ofp/platform';

const modules = process.argv.indexOf('--modules');
if (modules >= 0) {
  const only = process.argv[modules + 1];
  const targets = Object.entries(TARGETS).filter(([target]) => only === undefined || target === only);
  if (targets.length === 0) {
    console.error(`no TARGET ${only}: ${Object.keys(TARGETS).join(', ')}`);
    process.exit(2);
  }
  for (const [target, roots] of targets)
    console.log(`TARGET=${target}\n${describeModuleGraph(MODULES, roots).replace(/^/gm, '  ')}\n`);
  process.exit(0);
}

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
for (const path of Object.keys(GENERATED_SECTIONS)) {
  const file = `${root}${path}`;
  await writeFile(file, withGeneratedSections(path, await readFile(file, 'utf8')));
  console.log(`wrote ${path}`);
}
