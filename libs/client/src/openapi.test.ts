import { readFile } from 'node:fs/promises';
import openapiTS, { COMMENT_HEADER, astToString } from 'openapi-typescript';
import { format, resolveConfig } from 'prettier';

const DOCUMENT = new URL('../../../docs/openapi.json', import.meta.url);
const TYPES = new URL('./openapi.ts', import.meta.url);
const MODELS = new URL('./models.ts', import.meta.url);

const stale = (file: string) =>
  new Error(
    `libs/client/src/${file} is not what docs/openapi.json generates: run \`npm run describe\` and commit it`,
  );

describe('the typed client', () => {
  it('has the types openapi-typescript generates from docs/openapi.json', async () => {
    // What `npm run generate -w @ofp/client` (openapi-typescript's command line) writes. A default
    // makes a field optional to send: it is required in the responses' schemas where it is always there.
    const generated = `${COMMENT_HEADER}${astToString(await openapiTS(DOCUMENT, { defaultNonNullable: false }))}`;
    if (generated !== (await readFile(TYPES, 'utf8'))) throw stale('openapi.ts');
  }, 60_000);

  it('has the model and event maps scripts/models.mjs generates from docs/openapi.json', async () => {
    const { modelsSource } = (await import(new URL('../scripts/models.mjs', import.meta.url).href)) as {
      modelsSource: (document: unknown) => string;
    };
    const document: unknown = JSON.parse(await readFile(DOCUMENT, 'utf8'));
    const path = MODELS.pathname;
    const generated = await format(modelsSource(document), {
      ...(await resolveConfig(path)),
      filepath: path,
    });
    if (generated !== (await readFile(MODELS, 'utf8'))) throw stale('models.ts');
  });
});
