import { z } from 'zod';
import { DomainError, type FieldErrors } from '@ofp/contracts';
import type {
  ColumnDefinition,
  DecimalColumn,
  FieldDefinition,
  FieldMap,
  IntegerColumn,
  ModelDefinition,
  ReferenceDefinition,
  StringColumn,
} from './fields.js';
import { WHITESPACE, canonicalDecimal, canonicalTimestamp, isDate, isTimestamp } from './formats.js';
import type { StateMachine } from './state-machine.js';

/** A validated request body: the writable fields that were given, in canonical form. */
export type RecordBody = Record<string, unknown>;

/**
 * `create`: required fields must be present and defaults are filled in. `update`: every field is
 * optional and what is left out keeps its value. Nested lists and embedded objects are always
 * validated in full, because a list or object given replaces the old one (API.md §5).
 */
type Mode = 'create' | 'update';

/**
 * Validates a create body (API.md §5): required fields present, unknown and read-only fields dropped.
 * @throws DomainError `Unprocessable` with errors by column path (`phone_numbers[0].number`).
 */
export function validateCreate(model: ModelDefinition, body: unknown): RecordBody {
  return validate(requestBodySchema(model, 'create'), body);
}

/**
 * Validates an update body (PUT/PATCH): every field optional, a nested list given replaces the list.
 * @throws DomainError `Unprocessable` with errors by column path.
 */
export function validateUpdate(model: ModelDefinition, body: unknown): RecordBody {
  return validate(requestBodySchema(model, 'update'), body);
}

/**
 * The numbers of a record (its nested lists and objects included) beyond what their columns hold, by
 * column path: a decided record's derived values (`total`, `lines[2].amount`, `amount_due`, stock
 * totals), which no request validated. Empty when every number fits.
 */
export function boundsErrors(
  fields: FieldMap,
  record: Readonly<Record<string, unknown>>,
  path = '',
): FieldErrors {
  const errors: FieldErrors = {};
  for (const [name, field] of Object.entries(fields)) {
    const value = record[name];
    const at = path === '' ? name : `${path}.${name}`;
    if (value === null || value === undefined) continue;
    if (field.kind === 'column') {
      const problem = boundsProblem(field, value);
      if (problem !== undefined) errors[at] = [problem];
    } else if (field.kind === 'list' && Array.isArray(value)) {
      value.forEach((element: Record<string, unknown>, index) =>
        Object.assign(errors, boundsErrors(field.fields, element, `${at}[${index}]`)),
      );
    } else if (field.kind === 'object' && typeof value === 'object') {
      Object.assign(errors, boundsErrors(field.fields, value as Record<string, unknown>, at));
    }
  }
  return errors;
}

function boundsProblem(column: ColumnDefinition, value: unknown): string | undefined {
  if (column.type === 'integer') {
    if (typeof value === 'number' && Number.isInteger(value) && value >= column.min && value <= column.max)
      return undefined;
    return `would be ${String(value)}, beyond what it holds (${column.min} to ${column.max})`;
  }
  if (column.type === 'decimal') {
    const canonical = typeof value === 'string' ? canonicalDecimal(value, column) : undefined;
    if (canonical && 'value' in canonical) return undefined;
    return `would have more digits than it holds (${column.integerDigits} before the point, ${column.scale} after it)`;
  }
  return undefined;
}

/** Formats a zod issue path the way the envelope names nested columns: `lines[2].quantity`. */
export function columnPath(path: readonly PropertyKey[]): string {
  return path
    .map((key, index) =>
      typeof key === 'number' ? `[${key}]` : index === 0 ? String(key) : `.${String(key)}`,
    )
    .join('');
}

function validate(schema: z.ZodType, body: unknown): RecordBody {
  const result = schema.safeParse(body);
  if (result.success) return result.data as RecordBody;
  const errors: FieldErrors = {};
  for (const issue of result.error.issues) {
    (errors[issue.path.length === 0 ? 'base' : columnPath(issue.path)] ??= []).push(issue.message);
  }
  throw new DomainError('Unprocessable', errors);
}

const schemas = {
  create: new WeakMap<ModelDefinition, z.ZodType>(),
  update: new WeakMap<ModelDefinition, z.ZodType>(),
};

/**
 * The schema a create (`create`) or update (`update`) body is validated with. Built on first use
 * rather than at import: references are thunks that may point at models declared later.
 */
export function requestBodySchema(model: ModelDefinition, mode: Mode): z.ZodType {
  let schema = schemas[mode].get(model);
  if (!schema) {
    schema = objectSchema(model.fields, mode, model.stateMachine);
    schemas[mode].set(model, schema);
  }
  return schema;
}

/** A message for a value of the wrong type, or a missing or null one. */
function typeError(expected: string) {
  return (issue: { input?: unknown }): string =>
    issue.input === undefined
      ? 'is required'
      : issue.input === null
        ? "can't be null"
        : `must be ${expected}`;
}

/**
 * `machine`: the record's state machine, whose column the document shows with the states a client
 * may ask for (API.md §6: setting a derived one is a 422, which the validator says in its own words).
 */
function objectSchema(fields: FieldMap, mode: Mode, machine?: StateMachine): z.ZodType {
  const shape: Record<string, z.ZodType> = {};
  for (const [name, field] of Object.entries(fields)) {
    const schema =
      machine?.column === name && field.kind === 'column' && field.type === 'string'
        ? presence(columnSchema(field, machine.derived), field, mode)
        : fieldSchema(field, mode);
    if (schema) shape[name] = documented(schema, referenceRule(field));
  }
  // z.object drops keys it does not know, which is how unknown and read-only fields are ignored.
  return z.object(shape, { error: typeError('a JSON object') });
}

function fieldSchema(field: FieldDefinition, mode: Mode): z.ZodType | undefined {
  switch (field.kind) {
    case 'column':
      return field.readOnly ? undefined : presence(columnSchema(field), field, mode);
    case 'list': {
      const schema = z
        .array(objectSchema(field.fields, 'create'), { error: typeError('an array') })
        .max(field.maxItems, `must have at most ${field.maxItems} elements`);
      return mode === 'create' ? schema.default(() => []) : schema.optional();
    }
    case 'object':
      return presence(objectSchema(field.fields, 'create'), relationPresence(field), mode);
    case 'reference':
      return presence(referenceSchema(field), relationPresence(field), mode);
    case 'joined':
      return undefined;
    default: {
      const unhandled: never = field;
      throw new Error(`unknown field kind ${JSON.stringify(unhandled)}`);
    }
  }
}

/**
 * A field's schema with what the reference says of it: its description, and `readOnly` for a column
 * the server keeps (ids, versions, timestamps, derived values), which request bodies leave out.
 */
export function documented(schema: z.ZodType, field: FieldDefinition): z.ZodType {
  const readOnly = field.kind === 'column' && field.readOnly;
  if (field.description === undefined && !readOnly) return schema;
  return schema.meta({
    ...(field.description === undefined ? {} : { description: field.description }),
    ...(readOnly ? { readOnly: true } : {}),
  });
}

/**
 * A column holding another record's id, with what its description owes a writer: the record must
 * exist in the writer's organization (a rule across records, which no JSON Schema can state).
 */
function referenceRule(field: FieldDefinition): FieldDefinition {
  if (field.kind !== 'column' || field.type !== 'integer' || field.references === undefined) return field;
  const target = field.references();
  const rule = `It must be the id of an existing ${target.singular.replace(/_/g, ' ')} of your organization: any other is a 422 on this field`;
  return { ...field, description: field.description === undefined ? rule : `${field.description}. ${rule}` };
}

/** A to-one relation that is not required may be null. */
function relationPresence(field: { required: boolean }): { required: boolean; nullable: boolean } {
  return { required: field.required, nullable: !field.required };
}

/** Whether a field may be left out or be null, and its default on create. */
function presence(
  schema: z.ZodType,
  field: { required: boolean; nullable: boolean; default?: unknown },
  mode: Mode,
): z.ZodType {
  const value = field.nullable ? schema.nullable() : schema;
  if (mode === 'update') return value.optional();
  if (field.required) return value;
  return field.default === undefined ? value.optional() : value.default(field.default);
}

/** `derived`: values of an enumeration that the document leaves out, only the system setting them. */
function columnSchema(column: ColumnDefinition, derived: readonly string[] = []): z.ZodType {
  switch (column.type) {
    case 'string':
      return z
        .string({ error: typeError('a string') })
        .superRefine((value, context) => {
          const problem = stringProblem(column, value);
          if (problem) context.addIssue({ code: 'custom', message: problem });
        })
        .meta(stringConstraints(column, derived));
    case 'integer':
      return z
        .number({ error: typeError('an integer') })
        .superRefine((value, context) => {
          const problem = integerProblem(column, value);
          if (problem) context.addIssue({ code: 'custom', message: problem });
        })
        .meta({ type: 'integer', minimum: column.min, maximum: column.max });
    case 'decimal':
      return z
        .union([z.string(), z.number()], { error: typeError('a decimal string such as "12.50"') })
        .transform((value, context) => {
          const canonical = canonicalDecimal(value, column);
          const problem =
            'problem' in canonical ? canonical.problem : negativeProblem(column, canonical.value);
          if (problem === undefined) return (canonical as { value: string }).value;
          context.addIssue({ code: 'custom', message: problem });
          return z.NEVER;
        })
        .meta(decimalConstraints(column));
    case 'boolean':
      return z.boolean({ error: typeError('true or false') });
    case 'date':
      return z
        .string({ error: typeError('a date (YYYY-MM-DD)') })
        .refine(isDate, 'must be a date (YYYY-MM-DD)')
        .meta({ format: 'date' });
    case 'timestamp':
      return z
        .string({ error: typeError('an RFC 3339 timestamp') })
        .refine(isTimestamp, 'must be an RFC 3339 timestamp such as 2026-11-21T07:30:00.000Z')
        .transform(canonicalTimestamp)
        .meta({ format: 'date-time' });
    default: {
      const unhandled: never = column;
      throw new Error(`unknown column type ${JSON.stringify(unhandled)}`);
    }
  }
}

/**
 * What the checks of a string column say, for the JSON Schema of request bodies: zod sees only the
 * refinement, which reports one problem at a time with the envelope's messages.
 */
function stringConstraints(column: StringColumn, derived: readonly string[]): Record<string, unknown> {
  if (column.values)
    return { maxLength: column.maxLength, enum: column.values.filter((value) => !derived.includes(value)) };
  if (column.pattern) return { maxLength: column.maxLength, pattern: column.pattern.regex.source };
  return { maxLength: column.maxLength, pattern: column.required ? NOT_BLANK : NO_NUL };
}

/**
 * What {@link stringProblem} refuses of a column without a pattern of its own: a NUL anywhere, and a
 * required one that trim() leaves empty (JavaScript's {@link WHITESPACE}, written out so that Python's
 * regular expressions read it the same), in the ECMA-262 syntax JSON Schema patterns use.
 */
const NO_NUL = '^[^\\u0000]*$';
const NOT_BLANK = `^[^\\u0000]*[^${WHITESPACE}\\u0000][^\\u0000]*$`;

function stringProblem(column: StringColumn, value: string): string | undefined {
  // Postgres text cannot hold NUL; letting one through would stop the projector at that event.
  if (value.includes('\u0000')) return 'must not contain NUL characters';
  if (column.required && value.trim() === '') return "can't be blank";
  if (codePoints(value, column.maxLength) > column.maxLength)
    return `must be at most ${column.maxLength} characters`;
  if (column.values && !column.values.includes(value)) return `must be one of: ${column.values.join(', ')}`;
  if (column.pattern && !column.pattern.regex.test(value)) return column.pattern.message;
  return undefined;
}

/**
 * The characters of a string as JSON Schema's `maxLength` and Postgres's `varchar(n)` count them (code
 * points: a surrogate pair is one), counted only when its UTF-16 length could be over `limit`.
 */
function codePoints(value: string, limit: number): number {
  if (value.length <= limit) return value.length;
  let count = 0;
  for (const _ of value) count++;
  return count;
}

function integerProblem(column: IntegerColumn, value: number): string | undefined {
  if (!Number.isInteger(value)) return 'must be an integer';
  if (value < column.min) return `must be at least ${column.min}`;
  if (value > column.max) return `must be at most ${column.max}`;
  return undefined;
}

function negativeProblem(column: DecimalColumn, canonical: string): string | undefined {
  if (column.min === 0 && canonical.startsWith('-')) return 'must be at least 0';
  return undefined;
}

/**
 * The bounds of a decimal for the JSON Schema of request bodies: a string of at most the column's
 * digits, or a JSON number below the largest it holds.
 */
function decimalConstraints(column: DecimalColumn): Record<string, unknown> {
  const limit = 10 ** column.integerDigits;
  return {
    anyOf: [
      { type: 'string', pattern: decimalPattern(column, 'request') },
      {
        type: 'number',
        exclusiveMaximum: limit,
        ...(column.min === 0 ? { minimum: 0 } : { exclusiveMinimum: -limit }),
      },
    ],
  };
}

/**
 * The pattern of a decimal column's strings: as a request may write them (`"12.5"`, `"12"`), or as
 * responses carry them (`minScale` to `scale` digits after the point).
 */
export function decimalPattern(column: DecimalColumn, as: 'request' | 'response'): string {
  const whole = `${column.min === 0 ? '' : '-?'}\\d{1,${column.integerDigits}}`;
  if (as === 'response' && column.minScale > 0) return `^${whole}\\.\\d{${column.minScale},${column.scale}}$`;
  return `^${whole}(\\.\\d{1,${column.scale}})?$`;
}

/**
 * `{"id": 3}` or `{"name": "Work"}`: the target named by one of its lookup keys. The document says
 * "one of them" as a variant per key (`anyOf`), the form code generators read as a union
 * (openapi-typescript: `{id: number} | {name: string}`).
 */
function referenceSchema(field: ReferenceDefinition): z.ZodType {
  const target = field.target();
  const shape: Record<string, z.ZodType> = {};
  const variants: Record<string, unknown>[] = [];
  for (const key of field.lookupKeys) {
    const lookup = target.fields[key];
    if (lookup?.kind !== 'column') throw new Error(`${target.name}.${key} is not a column to look up by`);
    // The id is read-only on the target, but naming a record by it is what a reference is for.
    const schema = columnSchema(lookup).describe(
      `Names the ${target.singular.replace(/_/g, ' ')} by its ${key}`,
    );
    shape[key] = schema.optional();
    const { $schema: _dialect, ...property } = z.toJSONSchema(schema, {
      io: 'input',
      unrepresentable: 'any',
    });
    variants.push({ type: 'object', properties: { [key]: property }, required: [key] });
  }
  const keys = field.lookupKeys.join(' or ');
  return z
    .object(shape, { error: typeError(`an object naming the ${target.singular} by ${keys}`) })
    .refine(
      (value) => field.lookupKeys.some((key) => value[key] !== undefined),
      `must name the ${target.singular} by ${keys}`,
    )
    .meta({ anyOf: variants });
}
