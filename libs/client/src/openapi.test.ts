import { readFile } from 'node:fs/promises';
import openapiTS, { COMMENT_HEADER, astToString } from 'openapi-typescript';

const DOCUMENT = new URL('../../../docs/openapi.json', import.meta.url);
const TYPES = new URL('./openapi.ts', import.meta.url);

describe('the typed client', () => {
  it('has the types openapi-typescript generates from docs/openapi.json', async () => {
    // What `npm run generate -w @ofp/client` (openapi-typescript's command line) writes. A default
    // makes a field optional to send: it is required in the responses' schemas where it is always there.
    const generated = `${COMMENT_HEADER}${astToString(await openapiTS(DOCUMENT, { defaultNonNullable: false }))}`;
    if (generated !== (await readFile(TYPES, 'utf8')))
      throw new Error(
        'libs/client/src/openapi.ts is not what openapi-typescript generates from docs/openapi.json: run `npm run describe` and commit it',
      );
  }, 60_000);
});
