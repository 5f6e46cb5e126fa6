import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Parser } from '@asyncapi/parser';
import { DESCRIPTION_FILES, repositoryDescriptions } from './descriptions.js';
import { GENERATED_SECTIONS, withGeneratedSections } from './generated-docs.js';

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

describe('the generated parts of docs/ pages', () => {
  it.each(Object.keys(GENERATED_SECTIONS))('%s is what the code generates', async (path) => {
    const committed = await readFile(`${ROOT}${path}`, 'utf8');
    if (committed !== withGeneratedSections(path, committed))
      throw new Error(`${path} is stale: run \`npm run describe\` and commit it`);
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
