import { DomainError, type FieldErrors } from '@ofp/contracts';
import type { ColumnType, FieldMap, ModelDefinition, RelationDefinition } from './fields.js';
import { isDate, isTimestamp, utcTimestamp } from './formats.js';

// The `q` language of searches (API.md §4): parsed strictly into a typed query, or refused with a
// 400 whose errors name exactly what is wrong.

export const OPERATORS = ['=', '!=', '>', '<', '>=', '<=', 'in', 'not in'] as const;
export type Operator = (typeof OPERATORS)[number];

/** A value a filter compares with: the JSON type of the column (API.md §4). */
export type ScalarValue = string | number | boolean;

/** An operator with the value it takes. */
export type Comparison =
  | { readonly operator: '=' | '!='; readonly value: ScalarValue | null }
  | { readonly operator: '>' | '<' | '>=' | '<='; readonly value: ScalarValue }
  | { readonly operator: 'in' | 'not in'; readonly value: readonly ScalarValue[] };

/** A filter whose operand was resolved against the registry. */
export type Filter = Comparison & {
  /** Relations the operand follows, outermost first: `['phone_numbers', 'phone_number_type']`. */
  readonly relations: readonly string[];
  /** The column at the end of the path: `name`. */
  readonly column: string;
  readonly type: ColumnType;
};

export type Direction = 'asc' | 'desc';

export interface OrderTerm {
  /** A column of the model itself (order columns may not be dotted). */
  readonly column: string;
  readonly direction: Direction;
}

/** A parsed, valid `q`. */
export interface SearchQuery {
  readonly limit: number;
  readonly offset: number;
  readonly order: readonly OrderTerm[];
  readonly filters: readonly Filter[];
}

export const Q_LIMITS = {
  maxBytes: 8 * 1024,
  defaultLimit: 50,
  maxLimit: 500,
  maxOrder: 5,
  maxFilters: 20,
  maxRelations: 3,
  maxListValues: 1000,
} as const;

const Q_KEYS = ['limit', 'offset', 'order', 'filters'];
const ORDER_KEYS = ['column', 'direction'];
const FILTER_KEYS = ['operand', 'operator', 'value'];

/**
 * Parses the (URI-decoded) `q` parameter of a search against `model`; `undefined` means no `q`.
 * @throws DomainError `Invalid` with `errors.q` for problems of `q` as a whole, its `limit`, `offset`
 *   and `order`, and `errors["q.filters[N]"]`, `["q.filters[N].operand"]`, `["q.filters[N].operator"]`,
 *   `["q.filters[N].value"]` for problems of one filter.
 */
export function parseQuery(model: ModelDefinition, rawQ: string | undefined): SearchQuery {
  if (rawQ === undefined) return { limit: Q_LIMITS.defaultLimit, offset: 0, order: [], filters: [] };
  if (Buffer.byteLength(rawQ, 'utf8') > Q_LIMITS.maxBytes)
    throw invalid({ q: [`must be at most ${Q_LIMITS.maxBytes} bytes of JSON`] });
  let parsed: unknown;
  try {
    parsed = JSON.parse(rawQ);
  } catch {
    throw invalid({ q: ['must be valid JSON'] });
  }
  if (!isObject(parsed)) throw invalid({ q: ['must be a JSON object'] });

  const errors = new QueryErrors();
  for (const key of unknownKeys(parsed, Q_KEYS)) errors.add('q', `unknown key "${key}"`);
  const query: SearchQuery = {
    limit: parseLimit(parsed, errors),
    offset: parseOffset(parsed, errors),
    order: Object.hasOwn(parsed, 'order') ? parseOrder(model, parsed.order, errors) : [],
    filters: Object.hasOwn(parsed, 'filters') ? parseFilters(model, parsed.filters, errors) : [],
  };
  if (errors.any()) throw invalid(errors.byColumn);
  return query;
}

function invalid(errors: FieldErrors): DomainError {
  return new DomainError('Invalid', errors);
}

class QueryErrors {
  readonly byColumn: FieldErrors = {};

  add(column: string, message: string): void {
    (this.byColumn[column] ??= []).push(message);
  }

  any(): boolean {
    return Object.keys(this.byColumn).length > 0;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function unknownKeys(value: Record<string, unknown>, known: readonly string[]): string[] {
  return Object.keys(value).filter((key) => !known.includes(key));
}

function parseLimit(q: Record<string, unknown>, errors: QueryErrors): number {
  if (!Object.hasOwn(q, 'limit')) return Q_LIMITS.defaultLimit;
  const { limit } = q;
  if (typeof limit === 'number' && Number.isInteger(limit) && limit >= 1 && limit <= Q_LIMITS.maxLimit)
    return limit;
  errors.add('q', `limit must be an integer from 1 to ${Q_LIMITS.maxLimit}`);
  return Q_LIMITS.defaultLimit;
}

function parseOffset(q: Record<string, unknown>, errors: QueryErrors): number {
  if (!Object.hasOwn(q, 'offset')) return 0;
  const { offset } = q;
  if (typeof offset === 'number' && Number.isSafeInteger(offset) && offset >= 0) return offset;
  errors.add('q', `offset must be an integer from 0 to ${Number.MAX_SAFE_INTEGER}`);
  return 0;
}

function parseOrder(model: ModelDefinition, order: unknown, errors: QueryErrors): OrderTerm[] {
  if (!Array.isArray(order)) {
    errors.add('q', 'order must be an array of {column, direction}');
    return [];
  }
  if (order.length > Q_LIMITS.maxOrder) {
    errors.add('q', `order may have at most ${Q_LIMITS.maxOrder} elements`);
    return [];
  }
  return order.flatMap((term: unknown, index): OrderTerm[] => {
    const at = `order[${index}]`;
    if (!isObject(term)) {
      errors.add('q', `${at} must be an object {column, direction}`);
      return [];
    }
    for (const key of unknownKeys(term, ORDER_KEYS)) errors.add('q', `${at} has unknown key "${key}"`);
    const column = orderColumn(model, term, errors, at);
    const direction = Object.hasOwn(term, 'direction') ? term.direction : 'asc';
    if (direction !== 'asc' && direction !== 'desc') {
      errors.add('q', `${at}.direction must be "asc" or "desc"`);
      return [];
    }
    return column === undefined ? [] : [{ column, direction }];
  });
}

function orderColumn(
  model: ModelDefinition,
  term: Record<string, unknown>,
  errors: QueryErrors,
  at: string,
): string | undefined {
  const { column } = term;
  if (typeof column !== 'string') {
    errors.add('q', `${at}.column ${column === undefined ? 'is required' : 'must be a string'}`);
    return undefined;
  }
  if (column.includes('.')) {
    errors.add('q', `${at}.column may not be dotted: order by columns of ${model.name} itself`);
    return undefined;
  }
  const resolved = resolveOperand(model, column);
  if ('problem' in resolved) {
    errors.add('q', `${at}.column: ${resolved.problem}`);
    return undefined;
  }
  return column;
}

function parseFilters(model: ModelDefinition, filters: unknown, errors: QueryErrors): Filter[] {
  if (!Array.isArray(filters)) {
    errors.add('q', 'filters must be an array of {operand, operator, value}');
    return [];
  }
  if (filters.length > Q_LIMITS.maxFilters) {
    errors.add('q', `filters may have at most ${Q_LIMITS.maxFilters} elements`);
    return [];
  }
  return filters.flatMap((filter: unknown, index) => {
    const parsed = parseFilter(model, filter, `q.filters[${index}]`, errors);
    return parsed ? [parsed] : [];
  });
}

function parseFilter(
  model: ModelDefinition,
  filter: unknown,
  at: string,
  errors: QueryErrors,
): Filter | undefined {
  if (!isObject(filter)) {
    errors.add(at, 'must be an object {operand, operator, value}');
    return undefined;
  }
  for (const key of unknownKeys(filter, FILTER_KEYS)) errors.add(at, `unknown key "${key}"`);
  const operand = parseOperand(model, filter, `${at}.operand`, errors);
  const operator = parseOperator(filter, `${at}.operator`, errors);
  if (!Object.hasOwn(filter, 'value')) {
    errors.add(`${at}.value`, 'is required');
    return undefined;
  }
  // The value's type can only be checked against a known column and operator.
  if (!operand || !operator) return undefined;
  const comparison = parseComparison(operand.type, operator, filter.value);
  if ('problem' in comparison) {
    errors.add(`${at}.value`, comparison.problem);
    return undefined;
  }
  return { ...operand, ...comparison };
}

type Operand = Pick<Filter, 'relations' | 'column' | 'type'>;

function parseOperand(
  model: ModelDefinition,
  filter: Record<string, unknown>,
  at: string,
  errors: QueryErrors,
): Operand | undefined {
  const { operand } = filter;
  if (typeof operand !== 'string') {
    errors.add(at, operand === undefined ? 'is required' : 'must be a string');
    return undefined;
  }
  const resolved = resolveOperand(model, operand);
  if ('problem' in resolved) {
    errors.add(at, resolved.problem);
    return undefined;
  }
  return resolved;
}

function parseOperator(
  filter: Record<string, unknown>,
  at: string,
  errors: QueryErrors,
): Operator | undefined {
  const { operator } = filter;
  const known = OPERATORS.find((candidate) => candidate === operator);
  if (known) return known;
  errors.add(at, operator === undefined ? 'is required' : `must be one of ${OPERATORS.join(', ')}`);
  return undefined;
}

/**
 * Follows an operand's relations through the registry (`phone_numbers.phone_number_type.name`) to a
 * column. The depth limit is checked first, so the answer does not depend on the registry's depth.
 */
export function resolveOperand(model: ModelDefinition, operand: string): Operand | { problem: string } {
  const segments = operand.split('.');
  const relations = segments.slice(0, -1);
  const column = segments.at(-1)!;
  if (relations.length > Q_LIMITS.maxRelations)
    return { problem: `may follow at most ${Q_LIMITS.maxRelations} relations` };
  let fields: FieldMap = model.fields;
  for (const [index, name] of relations.entries()) {
    const path = segments.slice(0, index + 1).join('.');
    const relation = Object.hasOwn(fields, name) ? fields[name] : undefined;
    if (!relation) return { problem: `unknown relation "${path}"` };
    switch (relation.kind) {
      case 'column':
        return { problem: `"${path}" is a column, not a relation` };
      case 'reference':
      case 'joined':
      case 'list':
      case 'object':
        fields = relatedFields(relation);
        break;
      default: {
        const unhandled: never = relation;
        throw new Error(`unknown field kind ${JSON.stringify(unhandled)}`);
      }
    }
  }
  const field = Object.hasOwn(fields, column) ? fields[column] : undefined;
  if (!field) return { problem: `unknown column "${operand}"` };
  if (field.kind !== 'column') {
    const example = Object.entries(relatedFields(field)).find(([, candidate]) => candidate.kind === 'column');
    return {
      problem: `"${operand}" is a relation, not a column${example ? `: name one of its columns, such as "${operand}.${example[0]}"` : ''}`,
    };
  }
  return { relations, column, type: field.type };
}

/** The fields of the records a relation leads to. */
function relatedFields(relation: RelationDefinition): FieldMap {
  return relation.kind === 'reference' || relation.kind === 'joined'
    ? relation.target().fields
    : relation.fields;
}

function parseComparison(
  type: ColumnType,
  operator: Operator,
  value: unknown,
): Comparison | { problem: string } {
  switch (operator) {
    case 'in':
    case 'not in': {
      if (!Array.isArray(value)) return { problem: `must be an array of values for ${operator}` };
      if (value.length > Q_LIMITS.maxListValues)
        return { problem: `may have at most ${Q_LIMITS.maxListValues} values` };
      const values: ScalarValue[] = [];
      for (const [index, element] of value.entries()) {
        const checked = scalarValue(type, element);
        if (typeof checked === 'object') return { problem: `[${index}] ${checked.problem}` };
        values.push(checked);
      }
      return { operator, value: values };
    }
    case '=':
    case '!=': {
      if (value === null) return { operator, value };
      const checked = scalarValue(type, value);
      return typeof checked === 'object' ? checked : { operator, value: checked };
    }
    case '>':
    case '<':
    case '>=':
    case '<=': {
      if (value === null) return { problem: 'may be null only with = and !=' };
      const checked = scalarValue(type, value);
      return typeof checked === 'object' ? checked : { operator, value: checked };
    }
    default: {
      const unhandled: never = operator;
      throw new Error(`unknown operator ${String(unhandled)}`);
    }
  }
}

/** The value in the form the SQL takes it, or why it does not fit the column's type. */
function scalarValue(type: ColumnType, value: unknown): ScalarValue | { problem: string } {
  switch (type) {
    case 'string':
      if (typeof value !== 'string') return { problem: 'must be a string' };
      // A lone surrogate (`"\ud800"`, valid JSON) is no character: sent on, the driver's UTF-8 would
      // make it U+FFFD and the search would silently look for that (API.md §1: a 400, no replacement).
      if (!value.isWellFormed()) return { problem: 'holds a lone surrogate, which is no character' };
      // Postgres text cannot hold NUL: refused here rather than failing the statement.
      return value.includes('\u0000') ? { problem: 'must not contain NUL characters' } : value;
    case 'integer':
      return typeof value === 'number' && Number.isSafeInteger(value)
        ? value
        : { problem: 'must be an integer' };
    case 'decimal':
      return typeof value === 'number' && Number.isFinite(value) ? value : { problem: 'must be a number' };
    case 'boolean':
      return typeof value === 'boolean' ? value : { problem: 'must be true or false' };
    case 'date':
      return typeof value === 'string' && isDate(value)
        ? value
        : { problem: 'must be a date string (YYYY-MM-DD)' };
    case 'timestamp':
      return typeof value === 'string' && isTimestamp(value)
        ? utcTimestamp(value)
        : { problem: 'must be an RFC 3339 timestamp string such as 2026-11-21T07:30:00.000Z' };
    default: {
      const unhandled: never = type;
      throw new Error(`unknown column type ${String(unhandled)}`);
    }
  }
}
