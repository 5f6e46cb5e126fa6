import { z } from 'zod';
import type { QueryParameter } from '@ofp/http-api';
import { pageEnvelopeOf, singleEnvelopeOf } from '@ofp/contracts';
import type {
  ColumnDefinition,
  ColumnType,
  EventType,
  FieldDefinition,
  FieldMap,
  ModelDefinition,
} from './fields.js';
import { OPERATORS, Q_LIMITS, resolveOperand } from './query.js';
import { decimalPattern, documented, requestBodySchema } from './validation.js';

// The schemas of what the API exchanges, derived from the registry (API.md §2, §4-§6, §8): records as
// responses carry them, request bodies (the validation schemas themselves), the `q` language, the
// envelopes and the webhook payloads. Each is a zod schema with an id, so that the published
// descriptions (OpenAPI, AsyncAPI) are zod's JSON Schema output of the same declarations.

const cache = new Map<string, z.ZodType>();

/** A schema built once per key: zod registers ids globally, and each id must name one schema. */
function once<T extends z.ZodType>(key: string, build: () => T): T {
  let schema = cache.get(key);
  if (!schema) {
    schema = build();
    cache.set(key, schema);
  }
  return schema as T;
}

/**
 * A model's record fields without a schema id: the base of a record's other form (a webhook as the
 * API shows it), which takes the model's schema id itself, so that each id names one schema.
 */
export function recordFields(model: ModelDefinition): z.ZodObject {
  return fieldsSchema(model.fields);
}

/** `fulfillment_order` → `FulfillmentOrder`. */
export function schemaName(name: string): string {
  return name
    .split('_')
    .map((part) => part.charAt(0).toUpperCase() + part.slice(1))
    .join('');
}

/** A model's record as responses and events carry it: every field, in registry order. */
export function recordSchema(model: ModelDefinition): z.ZodObject {
  return once(`record:${model.name}`, () =>
    recordFields(model).meta({
      id: schemaName(model.singular),
      description: `A ${model.singular.replace(/_/g, ' ')} (API.md §6)`,
      ...examplesOf(model.example?.record),
    }),
  );
}

/** The body of a create (`create`) or of a PUT or PATCH (`update`): the schema requests are validated with. */
export function writeSchema(model: ModelDefinition, mode: 'create' | 'update'): z.ZodType {
  return once(`write:${mode}:${model.name}`, () =>
    requestBodySchema(model, mode).meta({
      id: `${schemaName(model.singular)}${mode === 'create' ? 'Create' : 'Update'}`,
      description:
        mode === 'create'
          ? `A new ${model.singular.replace(/_/g, ' ')}: its fields at top level; read-only and unknown fields are ignored`
          : 'The fields to change; fields left out keep their value, a nested list given replaces the list',
      ...examplesOf(
        model.example &&
          (mode === 'create' ? createExample(model, model.example.record) : model.example.update),
      ),
    }),
  );
}

/**
 * A create's example from the model's example record: its writable fields, less a state only the
 * system sets (a client asking for one gets a 422, API.md §6).
 */
function createExample(
  model: ModelDefinition,
  record: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const body = writableOf(model.fields, record);
  const machine = model.stateMachine;
  if (machine !== undefined && machine.derived.includes(body[machine.column] as string))
    delete body[machine.column];
  return body;
}

/** The envelope of a single record (API.md §2). */
export function singleEnvelopeSchema(model: ModelDefinition): z.ZodType {
  return once(`single:${model.name}`, () =>
    singleEnvelopeOf(recordSchema(model), `${schemaName(model.singular)}Envelope`),
  );
}

/** The envelope of a search page (API.md §2). */
export function searchEnvelopeSchema(model: ModelDefinition): z.ZodType {
  return once(`search:${model.name}`, () =>
    pageEnvelopeOf(recordSchema(model), `${schemaName(model.name)}Page`),
  );
}

/**
 * The `q` parameter of a model's search (API.md §4) as a JSON Schema: its keys, the model's columns to
 * order by, every operand (columns and dotted paths up to three relations deep), the operators and the
 * value type each takes, and the limits. `q` is also at most 8 KiB of JSON, which a schema cannot say.
 */
export function querySchema(model: ModelDefinition): z.ZodType {
  return once(`q:${model.name}`, () => {
    const columns = Object.entries(model.fields)
      .filter(([, field]) => field.kind === 'column')
      .map(([name]) => name);
    const byType = new Map<ColumnType, string[]>();
    for (const operand of operandsOf(model.fields, '', 0)) {
      const resolved = resolveOperand(model, operand);
      if ('problem' in resolved) continue;
      byType.set(resolved.type, [...(byType.get(resolved.type) ?? []), operand]);
    }
    const filters = [...byType].flatMap(([type, operands]) => {
      const operand = z
        .enum(operands as [string, ...string[]])
        .describe(`${withArticle(type)} column, or one reached through relations with dot syntax`);
      const value = filterValue(type);
      return [
        z.strictObject({
          operand,
          operator: z
            .enum(['=', '!='])
            .describe('Equal, not equal (strings case-sensitive; with null: IS NULL, IS NOT NULL)'),
          value: value.nullable().describe(`${withArticle(FILTER_VALUE_TYPES[type])}, or null`),
        }),
        z.strictObject({
          operand,
          operator: z.enum(['>', '<', '>=', '<=']).describe('A range bound'),
          value: value.describe(withArticle(FILTER_VALUE_TYPES[type])),
        }),
        z.strictObject({
          operand,
          operator: z.enum(['in', 'not in']).describe('One of the values, or none of them'),
          value: z
            .array(value)
            .max(Q_LIMITS.maxListValues)
            .describe(
              `A list of ${FILTER_VALUE_TYPES[type]} values (\`in []\` matches nothing, \`not in []\` everything)`,
            ),
        }),
      ];
    });
    return z
      .strictObject({
        limit: z
          .int()
          .min(1)
          .max(Q_LIMITS.maxLimit)
          .default(Q_LIMITS.defaultLimit)
          .optional()
          .describe('Records per page'),
        offset: z.int().min(0).default(0).optional().describe('Matches to skip before the page'),
        order: z
          .array(
            z.strictObject({
              column: z.enum(columns as [string, ...string[]]).describe('A column of the model (not dotted)'),
              direction: z
                .enum(['asc', 'desc'])
                .default('asc')
                .optional()
                .describe('Nulls sort last ascending, first descending; strings by byte order'),
            }),
          )
          .max(Q_LIMITS.maxOrder)
          .optional()
          .describe('Sort keys, earlier ones first; id ascending breaks the remaining ties'),
        filters: z
          .array(z.union(filters as unknown as [z.ZodType, z.ZodType, ...z.ZodType[]]))
          .max(Q_LIMITS.maxFilters)
          .optional()
          .describe(
            'Conditions a record must all meet; dotted filters on the same relation match the same related record',
          ),
      })
      .meta({
        id: `${schemaName(model.name)}Query`,
        description: `A search of ${model.name}: filters ANDed (operators ${OPERATORS.join(', ')}), then ordered with id asc breaking ties, then paged. At most ${Q_LIMITS.maxBytes} bytes of JSON.`,
      });
  });
}

/** What a model's search does, as the reference describes it (API.md §4). */
export function searchDescription(model: ModelDefinition): string {
  return `Searches the organization's ${model.name.replace(/_/g, ' ')}. \`q\`, a URI-escaped JSON object, holds \`filters\` (each \`{operand, operator, value}\`, all of which must match), \`order\` (by the columns given, then by id) and the page (\`limit\` up to ${Q_LIMITS.maxLimit}, \`offset\`). A dotted operand follows a relation, and filters on the same relation match the same related record. The answer is a page of records with \`total_results\`, every match whatever the page. Needs the \`read\` scope.`;
}

/** The `q` parameter of a model's search as the route table declares it (API.md §4). */
export function searchParameter(model: ModelDefinition): QueryParameter {
  return {
    description: `The search, as a URI-escaped JSON object of at most ${Q_LIMITS.maxBytes} bytes: filters (ANDed), order and page. See "Searching with q" above.`,
    schema: querySchema(model),
    json: true,
    examples: searchExamples(model),
  };
}

type SearchExample = { readonly summary: string; readonly value: Record<string, unknown> };

/**
 * Worked examples of a model's `q` (API.md §4), made from its example record so that they name its
 * real columns and values: an equality, a list of values, a range with an order and a page, and
 * filters through a relation that match the same related record.
 */
export function searchExamples(model: ModelDefinition): Record<string, SearchExample> {
  const record = model.example?.record;
  if (record === undefined) return {};
  const examples: Record<string, SearchExample> = {};
  const columns = Object.entries(model.fields).flatMap(([name, field]) =>
    field.kind === 'column' && field.type === 'string' ? [{ name, field }] : [],
  );
  const enumerated = columns.find(({ field }) => field.values !== undefined);
  const equal = enumerated ?? columns.find(({ name }) => typeof record[name] === 'string');
  if (equal !== undefined && typeof record[equal.name] === 'string')
    examples.equality = {
      summary: `${equal.name} equal to ${String(record[equal.name])}`,
      value: { filters: [{ operand: equal.name, operator: '=', value: record[equal.name] }] },
    };
  if (enumerated?.field.values !== undefined)
    examples.oneOf = {
      summary: `${enumerated.name} one of several, ordered by id descending`,
      value: {
        filters: [{ operand: enumerated.name, operator: 'in', value: enumerated.field.values.slice(0, 2) }],
        order: [{ column: 'id', direction: 'desc' }],
      },
    };
  examples.range = {
    summary: 'Created in November 2026, newest first, 20 per page',
    value: {
      filters: [
        { operand: 'created_at', operator: '>=', value: '2026-11-01T00:00:00Z' },
        { operand: 'created_at', operator: '<', value: '2026-12-01T00:00:00Z' },
      ],
      order: [{ column: 'created_at', direction: 'desc' }],
      limit: 20,
    },
  };
  const related = relatedFilters(model.fields, record);
  if (related !== undefined) examples.relation = related;
  return examples;
}

/**
 * Two filters through the model's first relation that has values to show, which the same related
 * record must meet (`lines.sku` and `lines.quantity` of one line): from the example record's first
 * element, or from the example of a joined model.
 */
function relatedFilters(
  fields: FieldMap,
  record: Readonly<Record<string, unknown>>,
): SearchExample | undefined {
  // Lists first: "the same related record" matters most where there are several.
  const relations = Object.entries(fields).sort(
    ([, a], [, b]) => Number(b.kind === 'list') - Number(a.kind === 'list'),
  );
  for (const [name, field] of relations) {
    let target: { fields: FieldMap; values: Readonly<Record<string, unknown>> } | undefined;
    if (field.kind === 'list' && Array.isArray(record[name]) && record[name].length > 0)
      target = { fields: field.fields, values: record[name][0] as Record<string, unknown> };
    else if (field.kind === 'object' && record[name] !== null && typeof record[name] === 'object')
      target = { fields: field.fields, values: record[name] as Record<string, unknown> };
    else if (field.kind === 'joined' && field.target().example !== undefined)
      target = { fields: field.target().fields, values: field.target().example!.record };
    if (target === undefined) continue;
    const filters = Object.entries(target.fields)
      .flatMap(([column, definition]) => {
        const value = target.values[column];
        if (definition.kind === 'reference' && value !== null && typeof value === 'object') {
          const [display] = definition.display;
          const shown = display === undefined ? undefined : (value as Record<string, unknown>)[display];
          return shown === undefined
            ? []
            : [{ operand: `${name}.${column}.${display}`, operator: '=', value: shown }];
        }
        if (definition.kind !== 'column' || value === null || value === undefined) return [];
        if (definition.type === 'integer' && column !== 'id' && !column.endsWith('_id'))
          return [{ operand: `${name}.${column}`, operator: '>=', value }];
        if (definition.type === 'string' && column !== 'external_id')
          return [{ operand: `${name}.${column}`, operator: '=', value }];
        return [];
      })
      .slice(0, 2);
    if (filters.length < 2) continue;
    const [first, second] = filters;
    return {
      summary: `One of its ${name.replace(/_/g, ' ')} with ${first!.operand.slice(name.length + 1)} ${first!.operator} ${JSON.stringify(first!.value)} and, on the same one, ${second!.operand.slice(name.length + 1)} ${second!.operator} ${JSON.stringify(second!.value)}`,
      value: { filters },
    };
  }
  return undefined;
}

/** The delivery body of one event type (API.md §8), its `data` the record after the change. */
export function eventPayloadSchema(
  model: ModelDefinition,
  eventType: EventType,
  record = recordSchema(model),
  example = eventExample(model, eventType.type),
): z.ZodType {
  return once(`event:${eventType.type}`, () =>
    z
      .strictObject({
        id: z.uuid().describe('The event id, also the webhook-id header: stable across retries'),
        type: z.literal(eventType.type).describe('The event type'),
        timestamp: z.iso.datetime().describe('When the change was recorded (RFC 3339, UTC)'),
        sequence: z
          .int()
          .min(1)
          .describe("The record's version after the change: drop events older than one seen"),
        data: record,
        previous_attributes: record.partial().describe("The changed fields' values before the change"),
      })
      .meta({
        id: `${schemaName(eventType.type.replace('.', '_'))}Event`,
        description: eventType.description,
        ...examplesOf(example),
      }),
  );
}

/** `examples` of a schema's metadata (JSON Schema 2020-12, which Redoc's samples show): none without one. */
function examplesOf(example: unknown): { examples?: unknown[] } {
  return example === undefined ? {} : { examples: [example] };
}

/**
 * A record as a create body gives it: its writable fields, references by their lookup keys. Nested
 * lists and objects keep their own writable fields.
 */
export function writableOf(
  fields: FieldMap,
  record: Readonly<Record<string, unknown>>,
): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(fields)) {
    const value = record[name];
    if (value === undefined || field.kind === 'joined' || (field.kind === 'column' && field.readOnly))
      continue;
    if (field.kind === 'list' && Array.isArray(value))
      body[name] = value.map((element: Record<string, unknown>) => writableOf(field.fields, element));
    else if (field.kind === 'object' && value !== null)
      body[name] = writableOf(field.fields, value as Record<string, unknown>);
    else if (field.kind === 'reference' && value !== null) {
      const named = value as Record<string, unknown>;
      const key = field.lookupKeys.find((lookup) => lookup !== 'id' && named[lookup] !== undefined) ?? 'id';
      body[name] = { [key]: named[key] };
    } else body[name] = value;
  }
  return body;
}

/** An example delivery body (API.md §8). */
export interface EventExample {
  readonly id: string;
  readonly type: string;
  readonly timestamp: string;
  readonly sequence: number;
  readonly data: Readonly<Record<string, unknown>>;
  readonly previous_attributes: Readonly<Record<string, unknown>>;
}

/** A fixed event id for the examples: a UUID such as the platform assigns. */
const EXAMPLE_EVENT_ID = '3f2c9a7e-5b1d-4e8a-9c61-0d7b2e4f8a15';

/**
 * The delivery body of an event type as the model's example makes it: a creation is the record as it
 * was before the example's update (version 1), a deletion the record at its next version, the
 * model's own types the change the example declares for them, any other the example's update.
 */
export function eventExample(model: ModelDefinition, type: string): EventExample | undefined {
  const example = model.example;
  if (example === undefined) return undefined;
  const { record } = example;
  const version = record.version as number;
  const change: { record: Readonly<Record<string, unknown>>; previous: Readonly<Record<string, unknown>> } =
    type === `${model.singular}.created`
      ? {
          record: { ...record, ...example.previous, updated_at: record.created_at, version: 1 },
          previous: {},
        }
      : type === `${model.singular}.deleted`
        ? { record: { ...record, version: version + 1 }, previous: {} }
        : example.events?.[type] !== undefined
          ? {
              record: { ...record, ...example.events[type].record, version: version + 1 },
              previous: example.events[type].previous,
            }
          : example;
  return {
    id: EXAMPLE_EVENT_ID,
    type,
    timestamp: change.record.updated_at as string,
    sequence: change.record.version as number,
    data: change.record,
    previous_attributes: change.previous,
  };
}

/** The fields of a record or nested object, as responses carry them. */
function fieldsSchema(fields: FieldMap): z.ZodObject {
  const shape: Record<string, z.ZodType> = {};
  for (const [name, field] of Object.entries(fields)) {
    const schema = fieldSchema(field);
    if (schema) shape[name] = documented(schema, field);
  }
  return z.strictObject(shape);
}

/** A field's value as responses carry it; none for a joined relation. */
function fieldSchema(field: FieldDefinition): z.ZodType | undefined {
  switch (field.kind) {
    case 'column':
      return field.nullable ? columnValue(field).nullable() : columnValue(field);
    case 'list':
      return z.array(fieldsSchema(field.fields));
    case 'object':
      return field.required ? fieldsSchema(field.fields) : fieldsSchema(field.fields).nullable();
    case 'reference': {
      const target = field.target();
      const display = Object.fromEntries(
        field.display.map((column) => {
          const definition = target.fields[column];
          if (definition?.kind !== 'column') throw new Error(`${target.name}.${column} is not a column`);
          return [column, documented(columnValue(definition), definition)];
        }),
      );
      const reference = z.strictObject({
        id: z
          .int()
          .min(1)
          .describe(`The ${target.singular.replace(/_/g, ' ')}'s id`),
        ...display,
      });
      return field.required ? reference : reference.nullable();
    }
    case 'joined':
      // Followed by dot syntax in `q`, never rendered (the related records change on their own).
      return undefined;
    default: {
      const unhandled: never = field;
      throw new Error(`unknown field kind ${JSON.stringify(unhandled)}`);
    }
  }
}

/** A column's value as records carry it (API.md §1: money as decimal strings, RFC 3339 times). */
function columnValue(column: ColumnDefinition): z.ZodType {
  switch (column.type) {
    case 'string':
      if (column.values) return z.enum(column.values as [string, ...string[]]);
      return column.pattern
        ? z.string().max(column.maxLength).regex(column.pattern.regex)
        : z.string().max(column.maxLength);
    case 'integer':
      return z.int().min(column.min).max(column.max);
    case 'decimal':
      return z
        .string()
        .regex(new RegExp(decimalPattern(column, 'response')))
        .describe('A decimal string');
    case 'boolean':
      return z.boolean();
    case 'date':
      return z.iso.date();
    case 'timestamp':
      return z.iso.datetime();
    default: {
      const unhandled: never = column;
      throw new Error(`unknown column type ${JSON.stringify(unhandled)}`);
    }
  }
}

/** What a filter value of each column type is, in words. */
const FILTER_VALUE_TYPES: Readonly<Record<ColumnType, string>> = {
  string: 'string',
  integer: 'integer',
  decimal: 'number',
  boolean: 'boolean',
  date: 'date (YYYY-MM-DD)',
  timestamp: 'RFC 3339 timestamp',
};

/** `integer` → `An integer`. */
function withArticle(noun: string): string {
  return `${/^[aeiou]/.test(noun) ? 'An' : 'A'} ${noun}`;
}

/** A filter value of a column type (API.md §4): numbers for integers and decimals. */
function filterValue(type: ColumnType): z.ZodType {
  switch (type) {
    case 'string':
      return z.string();
    case 'integer':
      return z.int();
    case 'decimal':
      return z.number();
    case 'boolean':
      return z.boolean();
    case 'date':
      return z.iso.date();
    case 'timestamp':
      return z.iso.datetime({ offset: true });
    default: {
      const unhandled: never = type;
      throw new Error(`unknown column type ${String(unhandled)}`);
    }
  }
}

/** Every operand of `q`: each column, and each column through up to three relations. */
function operandsOf(fields: FieldMap, prefix: string, depth: number): string[] {
  return Object.entries(fields).flatMap(([name, field]) => {
    const path = `${prefix}${name}`;
    if (field.kind === 'column') return [path];
    if (depth >= Q_LIMITS.maxRelations) return [];
    const related =
      field.kind === 'reference' || field.kind === 'joined' ? field.target().fields : field.fields;
    return operandsOf(related, `${path}.`, depth + 1);
  });
}
