import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { DESCRIPTION_FILES, repositoryDescriptions } from './descriptions.js';

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
