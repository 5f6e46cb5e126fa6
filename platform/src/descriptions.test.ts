import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Parser } from '@asyncapi/parser';
import { DESCRIPTION_FILES, repositoryDescriptions } from './descriptions.js';
import { SETTINGS_PAGE, withSettingsTable } from './settings-table.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('the descriptions the repository keeps', () => {
  const generated = repositoryDescriptions();

  it.each(Object.entries(DESCRIPTION_FILES) as [keyof typeof DESCRIPTION_FILES, string][])(
    '%s (%s) is what the code generates',
    async (name, path) => {
      const committed: unknown = JSON.parse(await readFile(`${ROOT}${path}`, 'utf8'));
      try {
        expect(committed).toEqual(generated[name]);
      } catch (error) {
        throw new Error(
          `${path} is not what the code generates: run \`npm run describe\` and commit it.\n${(error as Error).message}`,
          { cause: error },
        );
      }
    },
  );
});

describe('the settings table', () => {
  it(`in ${SETTINGS_PAGE} is what platformConfigSchema generates`, async () => {
    const committed = await readFile(`${ROOT}${SETTINGS_PAGE}`, 'utf8');
    if (committed !== withSettingsTable(committed))
      throw new Error(`${SETTINGS_PAGE} is stale: run \`npm run describe\` and commit it`);
  });
});

describe('the AsyncAPI document', () => {
  it('parses with @asyncapi/parser without a diagnostic (no error, warning or hint)', async () => {
    const { diagnostics, document } = await new Parser().parse(
      JSON.stringify(repositoryDescriptions().asyncapi),
    );
    expect(
      diagnostics.map(({ code, message, path }) => `${path.join('.')}: ${String(code)}: ${message}`),
    ).toEqual([]);
    expect(
      document
        ?.channels()
        .all()
        .map((channel) => channel.address()),
    ).toContain('ofp.events.people');
  });
});
