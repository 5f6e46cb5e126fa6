import type { StateMachine } from './state-machine.js';

/** The scalar types a column can have. Each has one JSON shape (API.md §1) and one Postgres type. */
export type ColumnType = 'string' | 'integer' | 'decimal' | 'boolean' | 'date' | 'timestamp';

/**
 * What a field means, as the reference shows it (API.md §11): written once where the field is declared,
 * in the contract's voice (units, formats, what derives it). Bounds, enumerations and patterns need no
 * words: the published schema carries them, and read-only columns are marked `readOnly` there.
 */
export interface Described {
  readonly description?: string;
}

/** Constraints every column carries, whatever its type. */
export interface ColumnRules extends Described {
  /** Must be present and non-null on create, and can never be set to null. */
  readonly required: boolean;
  /** May hold null. False for required columns and for columns with a default. */
  readonly nullable: boolean;
  /** Kept by the server (ids, versions, timestamps, derived values): ignored in request bodies. */
  readonly readOnly: boolean;
  /** Unique per organization. The command side enforces it; the read model only indexes it. */
  readonly unique: boolean;
}

/** A regular expression a string must match, with the message shown when it does not. */
export interface TextPattern {
  readonly regex: RegExp;
  readonly message: string;
}

export interface StringColumn extends ColumnRules {
  readonly kind: 'column';
  readonly type: 'string';
  /**
   * In characters (Unicode code points, as JSON Schema's `maxLength` and Postgres's `varchar(n)` count
   * them): the read model stores the column as `varchar(maxLength)`.
   */
  readonly maxLength: number;
  readonly pattern?: TextPattern;
  /** The only values allowed (an enumeration such as a status). */
  readonly values?: readonly string[];
  readonly default?: string;
}

export interface IntegerColumn extends ColumnRules {
  readonly kind: 'column';
  readonly type: 'integer';
  /**
   * The bounds of its values (API.md §1), which also choose the read model's column type: `integer`
   * when they fit 32 bits, `bigint` otherwise. Never beyond ±(2^53 - 1), what a JavaScript number and
   * JSON parsers hold exactly.
   */
  readonly min: number;
  readonly max: number;
  /** The model whose record id this column holds (`customer_id` → people); checked by the command side. */
  readonly references?: () => ModelDefinition;
  readonly default?: number;
}

/**
 * A decimal, written and answered as a string (API.md §1: `"12.50"`). Its bounds are its digits: at
 * most `integerDigits` before the point and `scale` after it, the read model's `numeric(integerDigits
 * + scale, scale)`; nothing a client sent within them is rounded away.
 */
export interface DecimalColumn extends ColumnRules {
  readonly kind: 'column';
  readonly type: 'decimal';
  readonly integerDigits: number;
  /** Digits after the point at most. */
  readonly scale: number;
  /**
   * Digits after the point always written: values answer with at least this many and with the
   * further ones only when they are not zero (money, 2: `"12.5"` → `"12.50"`, `"12.1250"` → `"12.125"`).
   */
  readonly minScale: number;
  /** Refuses negative values when 0. */
  readonly min?: 0;
  readonly default?: string;
}

export interface BooleanColumn extends ColumnRules {
  readonly kind: 'column';
  readonly type: 'boolean';
  readonly default?: boolean;
}

export interface DateColumn extends ColumnRules {
  readonly kind: 'column';
  readonly type: 'date';
}

export interface TimestampColumn extends ColumnRules {
  readonly kind: 'column';
  readonly type: 'timestamp';
}

/** A scalar field, stored as one typed column. */
export type ColumnDefinition =
  StringColumn | IntegerColumn | DecimalColumn | BooleanColumn | DateColumn | TimestampColumn;

/** A to-many list of owned child records stored with the record (`phone_numbers`, `lines`, `packages`). */
export interface ListDefinition extends Described {
  readonly kind: 'list';
  readonly fields: FieldMap;
  readonly maxItems: number;
}

/** A to-one embedded object owned by the record (`ship_to`). */
export interface ObjectDefinition extends Described {
  readonly kind: 'object';
  readonly fields: FieldMap;
  readonly required: boolean;
}

/**
 * A to-one reference to a record of another model. Written as an object naming the target by one of
 * `lookupKeys` (`{"id": 3}` or `{"name": "Work"}`), answered as `{id, ...display}` read from the target.
 */
export interface ReferenceDefinition extends Described {
  readonly kind: 'reference';
  /** A thunk, so that models may refer to each other whatever order they are declared in. */
  readonly target: () => ModelDefinition;
  /** `id` and unique string columns of the target by which a body may name it. */
  readonly lookupKeys: readonly string[];
  /** Columns of the target shown beside `id` in responses. */
  readonly display: readonly string[];
  readonly required: boolean;
}

/**
 * A relation to records of another model joined by column values, not stored with the record: a
 * fulfillment order's `shipments` (shipments whose `fulfillment_order_id` is its `id`), an inventory
 * record's `item` (the item whose `sku` is its `sku`). Followed by dot syntax; neither written nor
 * rendered, because the related records change without the record's version changing.
 */
export interface JoinedDefinition extends Described {
  readonly kind: 'joined';
  /** A thunk, so that models may refer to each other whatever order they are declared in. */
  readonly target: () => ModelDefinition;
  /** The column of this model whose value the target's `targetColumn` must equal. */
  readonly column: string;
  readonly targetColumn: string;
}

/** A relation a `q` operand may follow with dot syntax. */
export type RelationDefinition = ListDefinition | ObjectDefinition | ReferenceDefinition | JoinedDefinition;

export type FieldDefinition = ColumnDefinition | RelationDefinition;

/** Fields by name, in the order responses show them. */
export type FieldMap = Readonly<Record<string, FieldDefinition>>;

/** Which token scope writes a model (API.md §7). */
export type WriteScope = 'write' | 'operations';

/**
 * Which writes a model takes: `all` (create, update, delete), `append-only` (create only:
 * inventory adjustments) or `read-only` (none: the inventory projection). Other methods are a 405.
 */
export type WriteAccess = 'all' | 'append-only' | 'read-only';

/** One model, declared once; validation, read-model SQL and the `q` compiler are derived from it. */
export interface ModelDefinition {
  /** Plural, as in the endpoint path: `people`. */
  readonly name: string;
  /** Singular, as in event types: `person` (`person.created`). */
  readonly singular: string;
  readonly writeScope: WriteScope;
  /**
   * Some changes of the model are the fulfillment operator's (API.md §7: fulfillment status, receiving):
   * a token with `operations` may then write too, and the decided change names the scope it needs.
   */
  readonly operatorChanges: boolean;
  readonly writes: WriteAccess;
  /** False for models whose records must not vanish (invoices): DELETE answers 405. */
  readonly deletable: boolean;
  /** What to do instead of the methods its endpoints refuse (API.md §5), which their 405 names. */
  readonly instead?: string;
  /** Every field, the common ones (`id`, `external_id`, timestamps, `version`) included. */
  readonly fields: FieldMap;
  readonly stateMachine?: StateMachine;
  /**
   * Whether the read model keeps each record's rendered JSON beside its columns (written with the
   * record by `writeRecord`), so that reads fetch documents instead of rendering them. False for a
   * model whose rows other code writes straight into its tables, which is then rendered at read time.
   */
  readonly storedDocuments: boolean;
  /**
   * Whether the read-model DDL indexes the model's tables (per column and reference, for `q`). False
   * for a table its owner writes several times per record (the webhook delivery queue), which lays
   * out the indexes of its own access paths instead.
   */
  readonly indexed: boolean;
  /**
   * The event types a change of the model's records is announced as (API.md §8), with what each means:
   * `<singular>.created|updated|deleted` as its write access allows, then the model's own.
   */
  readonly eventTypes: readonly EventType[];
  /** The reference's example of the model (every model has one: a test asks). */
  readonly example?: ModelExample;
}

/**
 * A realistic record of a model, from which the reference's examples of it are made (API.md §11):
 * the record as responses carry it, the create body (its writable fields), the update that led to it,
 * the envelopes, and each event type's payload. A test validates every one against its schema.
 */
export interface ModelExample {
  /** The record as responses carry it: every field, read-only and derived ones included. */
  readonly record: Readonly<Record<string, unknown>>;
  /** A PUT or PATCH body that led to `record` (none for a model clients do not update). */
  readonly update?: Readonly<Record<string, unknown>>;
  /** The values of the fields that update changed, before it (`previous_attributes`). */
  readonly previous: Readonly<Record<string, unknown>>;
  /**
   * Event types whose change is another one: the fields of `record` it sets and those it changed
   * before it (`order.cancelled`: `{status: "cancelled"}` from `{status: "open"}`).
   */
  readonly events?: Readonly<
    Record<
      string,
      {
        readonly record: Readonly<Record<string, unknown>>;
        readonly previous: Readonly<Record<string, unknown>>;
      }
    >
  >;
}

/** An event type of the catalog (API.md §8 `GET /v2/webhook_event_types`). */
export interface EventType {
  readonly type: string;
  readonly model: string;
  readonly description: string;
}

type ColumnOptions<C extends ColumnDefinition> = Partial<Omit<C, 'kind' | 'type'>>;

/** The bounds of a 32-bit signed integer: quantities and every integer column not told otherwise. */
export const INT32 = { min: -2_147_483_648, max: 2_147_483_647 } as const;

/** The largest record id (API.md §1): ids stay within what a JavaScript number holds exactly. */
export const MAX_ID = Number.MAX_SAFE_INTEGER;

/** Money (API.md §1): at most 15 digits before the point and 4 after, answered with at least 2. */
export const MONEY = { integerDigits: 15, scale: 4, minScale: 2 } as const;

/** Weights (API.md §1): at most 12 digits before the point and 4 after, answered with at least 3. */
export const WEIGHT = { integerDigits: 12, scale: 4, minScale: 3 } as const;

function rules(options: Partial<ColumnRules> & { default?: unknown }): ColumnRules {
  const required = options.required ?? false;
  return {
    required,
    nullable: options.nullable ?? (!required && options.default === undefined),
    readOnly: options.readOnly ?? false,
    unique: options.unique ?? false,
  };
}

/** Column constructors; unspecified rules default to optional, nullable, writable and not unique. */
export const column = {
  /** Strings default to at most 255 characters. */
  string: (options: ColumnOptions<StringColumn> = {}): StringColumn => ({
    maxLength: 255,
    ...options,
    ...rules(options),
    kind: 'column',
    type: 'string',
  }),
  /**
   * Integers default to 32 bits (a quantity); a column that references a model holds its ids
   * (1 to {@link MAX_ID}).
   */
  integer: (options: ColumnOptions<IntegerColumn> = {}): IntegerColumn => ({
    ...(options.references ? { min: 1, max: MAX_ID } : INT32),
    ...options,
    ...rules(options),
    kind: 'column',
    type: 'integer',
  }),
  /** A money amount ({@link MONEY}). */
  money: (options: ColumnOptions<DecimalColumn> = {}): DecimalColumn => ({
    ...MONEY,
    ...options,
    ...rules(options),
    kind: 'column',
    type: 'decimal',
  }),
  /** A weight ({@link WEIGHT}). */
  weight: (options: ColumnOptions<DecimalColumn> = {}): DecimalColumn => ({
    ...WEIGHT,
    ...options,
    ...rules(options),
    kind: 'column',
    type: 'decimal',
  }),
  boolean: (options: ColumnOptions<BooleanColumn> = {}): BooleanColumn => ({
    ...options,
    ...rules(options),
    kind: 'column',
    type: 'boolean',
  }),
  date: (options: ColumnOptions<DateColumn> = {}): DateColumn => ({
    ...options,
    ...rules(options),
    kind: 'column',
    type: 'date',
  }),
  timestamp: (options: ColumnOptions<TimestampColumn> = {}): TimestampColumn => ({
    ...options,
    ...rules(options),
    kind: 'column',
    type: 'timestamp',
  }),
};

/** A to-many list of owned children; at most 1000 elements unless told otherwise. */
export function list(fields: FieldMap, options: { maxItems?: number } & Described = {}): ListDefinition {
  return { kind: 'list', fields, maxItems: options.maxItems ?? 1000, ...described(options) };
}

/** A to-one embedded object. */
export function embedded(
  fields: FieldMap,
  options: { required?: boolean } & Described = {},
): ObjectDefinition {
  return { kind: 'object', fields, required: options.required ?? false, ...described(options) };
}

/** A to-one reference to another model's record; named by `id` unless more lookup keys are given. */
export function reference(
  target: () => ModelDefinition,
  options: {
    lookupKeys?: readonly string[];
    display?: readonly string[];
    required?: boolean;
  } & Described = {},
): ReferenceDefinition {
  return {
    kind: 'reference',
    target,
    lookupKeys: options.lookupKeys ?? ['id'],
    display: options.display ?? [],
    required: options.required ?? false,
    ...described(options),
  };
}

/**
 * A relation to the `target` records whose `targetColumn` equals this record's `column`
 * (`joined(() => shipments, { column: 'id', targetColumn: 'fulfillment_order_id' })`).
 */
export function joined(
  target: () => ModelDefinition,
  options: { column: string; targetColumn: string } & Described,
): JoinedDefinition {
  return {
    kind: 'joined',
    target,
    column: options.column,
    targetColumn: options.targetColumn,
    ...described(options),
  };
}

/** The description of a declaration, when it has one (no `description: undefined` key otherwise). */
function described({ description }: Described): Described {
  return description === undefined ? {} : { description };
}

/** Columns every record has (API.md §1). `id` leads a record; the others close it. */
export const RECORD_ID = 'id';
export const RECORD_METADATA = {
  external_id: column.string({
    unique: true,
    description:
      "The integrator's own reference for the record (an ERP key), unique per organization and model: a second record with the same one is a 409",
  }),
  created_at: column.timestamp({
    readOnly: true,
    nullable: false,
    description: 'When the record was created (RFC 3339, UTC)',
  }),
  updated_at: column.timestamp({
    readOnly: true,
    nullable: false,
    description: 'When the record last changed (RFC 3339, UTC)',
  }),
  version: column.integer({
    readOnly: true,
    nullable: false,
    min: 1,
    max: MAX_ID,
    description:
      '1 on create, +1 per change (a delete included): the ETag is W/"<version>", If-Match takes it, and events carry it as `sequence`',
  }),
} as const satisfies FieldMap;

/** The record id every model leads with (API.md §1). */
const RECORD_ID_COLUMN = column.integer({
  readOnly: true,
  nullable: false,
  min: 1,
  max: MAX_ID,
  description:
    "The record's id, assigned by the server (or chosen with POST /v2/<model>/{id}); unique per model across all organizations",
});

/** Names the read model uses for its own columns; a field of that name would collide. */
const RESERVED_NAMES = /^(org_id|record_id|ordinal|.*_ordinal|document)$/;
const FIELD_NAME = /^[a-z][a-z0-9_]*$/;

export interface ModelDeclaration {
  readonly name: string;
  readonly singular: string;
  readonly writeScope: WriteScope;
  readonly operatorChanges?: boolean;
  readonly writes?: WriteAccess;
  readonly deletable?: boolean;
  /** What to do instead of the methods its endpoints refuse: the 405 names it. */
  readonly instead?: string;
  /** The model's own fields; the common ones are added. */
  readonly fields: FieldMap;
  readonly stateMachine?: StateMachine;
  /** True unless told otherwise. */
  readonly storedDocuments?: boolean;
  readonly indexed?: boolean;
  /**
   * Event types besides the generic ones, by type, with what each means (`order.cancelled`). A
   * `read-only` model, which clients do not write, has only these.
   */
  readonly events?: Readonly<Record<string, string>>;
  readonly example?: ModelExample;
}

/**
 * Completes a declaration with the common fields and checks the invariants the derived SQL relies on
 * (safe identifiers, no collisions with key columns, a state machine over an enumerated column).
 * Throws at declaration time, so a bad entry fails every test rather than one request.
 */
export function defineModel(declaration: ModelDeclaration): ModelDefinition {
  const { stateMachine, deletable, operatorChanges, writes, storedDocuments, indexed, ...rest } = declaration;
  const fields: FieldMap = {
    [RECORD_ID]: RECORD_ID_COLUMN,
    ...declaration.fields,
    ...RECORD_METADATA,
  };
  for (const name of [RECORD_ID, ...Object.keys(RECORD_METADATA)]) {
    if (Object.hasOwn(declaration.fields, name))
      throw new Error(`${declaration.name}.${name}: a common field, added by defineModel`);
  }
  checkFieldMap(declaration.name, fields);
  checkJoins(declaration.name, fields);
  if (!FIELD_NAME.test(declaration.name))
    throw new Error(`model name ${declaration.name} is not an identifier`);
  const model: ModelDefinition = {
    ...rest,
    fields,
    operatorChanges: operatorChanges ?? false,
    writes: writes ?? 'all',
    deletable: (deletable ?? true) && (writes ?? 'all') === 'all',
    storedDocuments: storedDocuments ?? true,
    indexed: indexed ?? true,
    eventTypes: eventTypesOf(declaration),
    ...(stateMachine ? { stateMachine } : {}),
  };
  if (stateMachine) checkStateMachine(model, stateMachine);
  return model;
}

/** The generic event types the model's write access gives (API.md §8), then its own. */
function eventTypesOf(declaration: ModelDeclaration): EventType[] {
  const writes = declaration.writes ?? 'all';
  const what = declaration.singular.replace(/_/g, ' ');
  const changes: [string, string][] =
    writes === 'read-only'
      ? []
      : writes === 'append-only'
        ? [['created', `A ${what} was created`]]
        : [
            ['created', `A ${what} was created`],
            ['updated', `A ${what} was changed`],
            ...((declaration.deletable ?? true)
              ? [['deleted', `A ${what} was deleted`] as [string, string]]
              : []),
          ];
  const own = Object.entries(declaration.events ?? {});
  for (const [type] of own) {
    if (!type.startsWith(`${declaration.singular}.`))
      throw new Error(`${declaration.name}: event type ${type} is not one of a ${declaration.singular}`);
  }
  return [
    ...changes.map(([change, description]) => [`${declaration.singular}.${change}`, description]),
    ...own,
  ].map(([type, description]) => ({ type: type!, model: declaration.name, description: description! }));
}

function checkFieldMap(path: string, fields: FieldMap): void {
  const names = Object.keys(fields);
  for (const name of names) {
    const field = fields[name]!;
    const where = `${path}.${name}`;
    if (!FIELD_NAME.test(name) || RESERVED_NAMES.test(name))
      throw new Error(`${where}: reserved or unsafe name`);
    if (field.kind === 'reference' && Object.hasOwn(fields, `${name}_id`))
      throw new Error(`${where}: the reference is stored as ${name}_id, which is also a field`);
    if (field.kind === 'list' || field.kind === 'object') {
      checkNoJoins(where, field.fields);
      checkFieldMap(where, field.fields);
    }
  }
}

/** A joined relation starts from a column of the model itself (only a model's row has an `id`). */
function checkJoins(path: string, fields: FieldMap): void {
  for (const [name, field] of Object.entries(fields)) {
    if (field.kind === 'joined' && fields[field.column]?.kind !== 'column')
      throw new Error(`${path}.${name}: joins by ${field.column}, which is not a column of ${path}`);
  }
}

function checkNoJoins(path: string, fields: FieldMap): void {
  for (const [name, field] of Object.entries(fields)) {
    if (field.kind === 'joined') throw new Error(`${path}.${name}: joined relations belong to models`);
  }
}

function checkStateMachine(model: ModelDefinition, machine: StateMachine): void {
  const status = model.fields[machine.column];
  if (status?.kind !== 'column' || status.type !== 'string' || !status.values)
    throw new Error(`${model.name}: the state machine needs an enumerated string column ${machine.column}`);
  const states = new Set(status.values);
  const named = [
    machine.initial,
    ...machine.derived,
    ...Object.entries(machine.transitions).flat(2),
    ...(machine.hold ? [machine.hold.state, ...machine.hold.from] : []),
  ];
  for (const state of named) {
    if (!states.has(state))
      throw new Error(`${model.name}: state ${state} is not a value of ${machine.column}`);
  }
}
