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

/**
 * The properties of every schema in a document, each as its JSON pointer with its schema. A property
 * that is a `$ref` is described by the schema it names (a sibling description then overrides it).
 */
function propertiesOf(node: unknown, pointer = '#'): [string, Record<string, unknown>][] {
  if (node === null || typeof node !== 'object') return [];
  const own =
    'properties' in node && typeof node.properties === 'object' && node.properties !== null
      ? Object.entries(node.properties as Record<string, Record<string, unknown>>).map(
          ([name, schema]): [string, Record<string, unknown>] => [`${pointer}/properties/${name}`, schema],
        )
      : [];
  return [
    ...own,
    ...Object.entries(node).flatMap(([key, value]) =>
      propertiesOf(value, `${pointer}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`),
    ),
  ];
}

describe('the reference describes every property (issue 26: a new model brings its own words)', () => {
  const documents = repositoryDescriptions();

  it.each(Object.keys(DESCRIPTION_FILES) as (keyof typeof DESCRIPTION_FILES)[])(
    'every property of %s has a description',
    (name) => {
      const document = documents[name] as {
        components: { schemas: Record<string, { description?: string }> };
      };
      const described = (schema: Record<string, unknown>): boolean =>
        typeof schema.description === 'string'
          ? schema.description.trim() !== ''
          : typeof schema.$ref === 'string' &&
            typeof document.components.schemas[schema.$ref.replace('#/components/schemas/', '')]
              ?.description === 'string';
      const properties = propertiesOf(document);
      expect(properties.length).toBeGreaterThan(100);
      // Declared once where the field is (the model registry's `description`, the API schemas'
      // `.describe()`), each property appears wherever its schema does: name one of each.
      const undescribed = [
        ...new Set(
          properties
            .filter(([, schema]) => !described(schema))
            .map(([pointer]) => pointer.replace(/\/(anyOf|oneOf|allOf)\/\d+/g, '')),
        ),
      ];
      expect(undescribed).toEqual([]);
    },
  );
});
