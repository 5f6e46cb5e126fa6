// Writes src/models.ts from docs/openapi.json (`npm run generate -w @ofp/client`, run by `npm run
// describe`): for every model the document serves, the types its search, reads and writes take and
// answer, found through the operations the route table names `<model>.search|get|create|update|delete`;
// and every webhook event type's body. The client's generic methods (`search('people', q)`) are typed
// by these, so that `q` is checked per model by the compiler. Plain JavaScript: it runs before a build.
import { readFile, writeFile } from 'node:fs/promises';
import { pathToFileURL } from 'node:url';

const HEADER = `// Generated from docs/openapi.json by scripts/models.mjs (npm run describe): do not edit.\n`;

/** The source of src/models.ts for an OpenAPI document. */
export function modelsSource(document) {
  const operations = new Map();
  for (const item of Object.values(document.paths))
    for (const operation of Object.values(item)) operations.set(operation.operationId, operation);
  const schemaName = (ref) => ref.replace('#/components/schemas/', '');
  const results = (operation, status) => {
    const envelope = operation.responses[status].content['application/json'].schema.$ref;
    return schemaName(document.components.schemas[schemaName(envelope)].properties.results.$ref ?? '');
  };
  const body = (operation) => schemaName(operation.requestBody.content['application/json'].schema.$ref);
  const lines = [];
  for (const [id, search] of operations) {
    const match = /^([a-z_]+)\.search$/.exec(id);
    if (!match) continue;
    const model = match[1];
    const q = search.parameters.find((parameter) => parameter.name === 'q');
    const query = schemaName(q.content['application/json'].schema.$ref);
    const get = operations.get(`${model}.get`);
    const create = operations.get(`${model}.create`);
    const update = operations.get(`${model}.update`);
    const members = [
      `query: S['${query}']`,
      `record: S['${results(get, '200')}']`,
      create ? `create: S['${body(create)}']` : 'create: never',
      create ? `created: S['${results(create, '201')}']` : 'created: never',
      update ? `update: S['${body(update)}']` : 'update: never',
      `deletable: ${operations.has(`${model}.delete`)}`,
    ];
    lines.push(`  ${model}: { ${members.join('; ')} };`);
  }
  const events = Object.entries(document.webhooks).map(
    ([type, item]) =>
      `  '${type}': S['${schemaName(item.post.requestBody.content['application/json'].schema.$ref)}'];`,
  );
  return `${HEADER}import type { components } from './openapi.js';

type S = components['schemas'];

/**
 * Every model the API serves, by its name in paths (\`/v2/people\`): its search's \`q\`, its record as
 * reads answer it, the bodies of its create and update and what a create answers (\`never\` where the
 * model takes none), and whether it may be deleted.
 */
export interface Models {
${lines.join('\n')}
}

/** Every event type, with the body its webhook deliveries and the events feed carry. */
export interface Events {
${events.join('\n')}
}
`;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const document = JSON.parse(await readFile(new URL('../../../docs/openapi.json', import.meta.url), 'utf8'));
  await writeFile(new URL('../src/models.ts', import.meta.url), modelsSource(document));
}
