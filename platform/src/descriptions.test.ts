import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { Parser } from '@asyncapi/parser';
import { Ajv, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import { MODELS, parseQuery, searchExamples } from '@ofp/models';
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

describe('what the OpenAPI document tells a client (or a fuzzer) that follows it', () => {
  const openapi = repositoryDescriptions().openapi as {
    paths: Record<string, Record<string, Operation>>;
    webhooks: Record<string, unknown>;
  };
  interface Operation {
    parameters?: { name?: string; style?: string; explode?: boolean; schema?: Record<string, unknown> }[];
    responses: Record<string, { links?: Record<string, { operationId: string; parameters: unknown }> }>;
  }

  it("links a webhook's test event to the delivery it made: its read and its retry (API.md §8)", () => {
    const links = openapi.paths['/v2/webhooks/{id}/test']!.post!.responses['201']!.links!;
    expect(Object.values(links).map(({ operationId }) => operationId)).toEqual([
      'webhook_deliveries.get',
      'webhook_deliveries.retry',
    ]);
    for (const link of Object.values(links))
      expect(link.parameters).toEqual({ id: '$response.body#/results/id' });
  });

  it("takes the events feed's types as a comma-separated list of the catalog's types", () => {
    const type = openapi.paths['/v2/events']!.get!.parameters!.find(({ name }) => name === 'type')!;
    expect(type).toMatchObject({
      style: 'form',
      explode: false,
      schema: { type: 'array', minItems: 1, maxItems: 20 },
    });
    expect((type.schema!.items as { enum: string[] }).enum.sort()).toEqual(
      Object.keys(openapi.webhooks).sort(),
    );
  });
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

/** A JSON pointer's escaped segment. */
const segment = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * Every example of a document with the schema it must satisfy, by JSON pointer: a schema's
 * `examples` (JSON Schema), a media type's or parameter's `example` and `examples` (OpenAPI Example
 * Objects), and an AsyncAPI message's `examples` (its payload and headers).
 */
function examplesOf(node: unknown, pointer = '#'): { where: string; schema: string; value: unknown }[] {
  if (node === null || typeof node !== 'object') return [];
  const found: { where: string; schema: string; value: unknown }[] = [];
  const object = node as Record<string, unknown>;
  const { examples } = object;
  if ('payload' in object && Array.isArray(examples)) {
    (examples as { payload?: unknown; headers?: unknown }[]).forEach((example, index) => {
      const where = `${pointer}/examples/${index}`;
      found.push({ where: `${where}/payload`, schema: `${pointer}/payload`, value: example.payload });
      if (example.headers !== undefined)
        found.push({ where: `${where}/headers`, schema: `${pointer}/headers`, value: example.headers });
    });
  } else if (Array.isArray(examples)) {
    examples.forEach((value, index) =>
      found.push({ where: `${pointer}/examples/${index}`, schema: pointer, value }),
    );
  } else if (examples !== null && typeof examples === 'object' && 'schema' in object) {
    for (const [name, example] of Object.entries(examples as Record<string, { value: unknown }>))
      found.push({
        where: `${pointer}/examples/${segment(name)}`,
        schema: `${pointer}/schema`,
        value: example.value,
      });
  }
  if ('example' in object && 'schema' in object)
    found.push({ where: `${pointer}/example`, schema: `${pointer}/schema`, value: object.example });
  for (const [key, value] of Object.entries(object)) {
    if (key === 'examples' || key === 'example') continue;
    found.push(...examplesOf(value, `${pointer}/${segment(key)}`));
  }
  return found;
}

describe('the examples of the reference (issue 26): each one valid against its schema, none a placeholder', () => {
  const documents = repositoryDescriptions();
  // OpenAPI 3.1 schemas are JSON Schema 2020-12; AsyncAPI 3's default schema format is draft-07. The
  // document is added whole so that `#/components/...` references resolve; OpenAPI's and AsyncAPI's
  // own keywords around the schemas are not JSON Schema, hence not strict.
  const validators = {
    openapi: new Ajv2020({ strict: false, allErrors: true, validateSchema: false }),
    asyncapi: new Ajv({ strict: false, allErrors: true, validateSchema: false }),
  };

  it.each(Object.keys(DESCRIPTION_FILES) as (keyof typeof DESCRIPTION_FILES)[])(
    'every example of %s validates',
    (name) => {
      const ajv = validators[name];
      (ajvFormats as unknown as typeof ajvFormats.default)(ajv);
      ajv.addSchema(documents[name], name);
      const examples = examplesOf(documents[name]);
      expect(examples.length).toBeGreaterThan(name === 'openapi' ? 100 : 10);
      const compiled = new Map<string, ValidateFunction>();
      const problems = examples.flatMap(({ where, schema, value }) => {
        const validate = compiled.get(schema) ?? ajv.compile({ $ref: `${name}${schema}` });
        compiled.set(schema, validate);
        return validate(value)
          ? []
          : (validate.errors ?? []).map(
              (error) => `${where}${error.instancePath}: ${error.message ?? 'invalid'}`,
            );
      });
      expect(problems).toEqual([]);
      // What Redoc shows when a schema has no example: the bounds of a 53-bit integer.
      const placeholders = examples
        .filter(({ value }) => /\b9007199254740991\b/.test(JSON.stringify(value)))
        .map(({ where }) => where);
      expect(placeholders).toEqual([]);
    },
  );

  it('every model has an example: its record, create and update bodies, envelopes and events', () => {
    const schemas = (
      documents.openapi as { components: { schemas: Record<string, { examples?: unknown[] }> } }
    ).components.schemas;
    const models = Object.entries(schemas).filter(([name]) =>
      /(Create|Update|Envelope|Page|Event)$/.test(name),
    );
    expect(models.length).toBeGreaterThan(80);
    expect(models.filter(([, schema]) => schema.examples === undefined).map(([name]) => name)).toEqual([]);
    const messages = Object.entries(
      (documents.asyncapi as { components: { messages: Record<string, { examples?: unknown[] }> } })
        .components.messages,
    );
    expect(messages.filter(([, message]) => message.examples === undefined).map(([name]) => name)).toEqual(
      [],
    );
  });
});

describe('the worked examples of q (issue 26): each one a search the parser takes', () => {
  it.each(Object.values(MODELS).map((model) => [model.name, model] as const))(
    '%s: equality, a list of values, a range with order and page, and one related record',
    (_name, model) => {
      const examples = searchExamples(model);
      expect(Object.keys(examples)).toEqual(expect.arrayContaining(['equality', 'range']));
      for (const { value } of Object.values(examples))
        expect(() => parseQuery(model, JSON.stringify(value))).not.toThrow();
    },
  );

  it('shows the same-related-record filters of a nested list through dot syntax', () => {
    expect(searchExamples(MODELS.people).relation?.value).toEqual({
      filters: [
        { operand: 'phone_numbers.number', operator: '=', value: '4155550123' },
        { operand: 'phone_numbers.phone_number_type.name', operator: '=', value: 'Work' },
      ],
    });
    expect(searchExamples(MODELS.orders).relation).toBeDefined();
  });
});
