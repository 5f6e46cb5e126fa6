// An in-memory reading of API.md §4, written independently of the SQL compiler, against which the
// integration tests (the search compiler's own, and the api's over HTTP) check what the read model
// answers.
import type { ColumnType, FieldMap, Filter, ModelDefinition, RecordDocument, SearchQuery } from '@ofp/models';

/** The current records of one organization, by model name. */
export type OracleWorld = (modelName: string) => readonly RecordDocument[];

/** Ids of the page and the total number of matches, as the API should answer them. */
export function oracleSearch(
  model: ModelDefinition,
  world: OracleWorld,
  query: SearchQuery,
): { total: number; ids: number[] } {
  const matching = world(model.name).filter((record) =>
    satisfies(model.fields, record, query.filters, world),
  );
  const sorted = [...matching].sort((a, b) => {
    for (const { column, direction } of query.order) {
      const order = compareForOrder(columnType(model.fields, column), a[column], b[column], direction);
      if (order !== 0) return order;
    }
    return (a.id as number) - (b.id as number);
  });
  return {
    total: matching.length,
    ids: sorted.slice(query.offset, query.offset + query.limit).map((record) => record.id as number),
  };
}

interface Pending {
  readonly relations: readonly string[];
  readonly filter: Filter;
}

/** Filters whose next relation is the same must all hold for one and the same related value. */
function satisfies(
  fields: FieldMap,
  value: RecordDocument,
  filters: readonly Filter[] | readonly Pending[],
  world: OracleWorld,
): boolean {
  const pending: Pending[] = filters.map((entry) =>
    'filter' in entry ? entry : { relations: entry.relations, filter: entry },
  );
  const own = pending.filter(({ relations }) => relations.length === 0);
  if (!own.every(({ filter }) => holds(columnType(fields, filter.column), value[filter.column], filter)))
    return false;
  const relationNames = [...new Set(pending.flatMap(({ relations }) => relations.slice(0, 1)))];
  return relationNames.every((name) => {
    const members = pending
      .filter(({ relations }) => relations[0] === name)
      .map(({ relations, filter }) => ({ relations: relations.slice(1), filter }));
    const { fields: relatedFields, values } = related(fields, value, name, world);
    return values.some((candidate) => satisfies(relatedFields, candidate, members, world));
  });
}

function related(
  fields: FieldMap,
  value: RecordDocument,
  name: string,
  world: OracleWorld,
): { fields: FieldMap; values: RecordDocument[] } {
  const field = fields[name]!;
  const nested = value[name];
  switch (field.kind) {
    case 'list':
      return { fields: field.fields, values: (nested as RecordDocument[] | null) ?? [] };
    case 'object':
      return { fields: field.fields, values: nested ? [nested as RecordDocument] : [] };
    case 'reference': {
      const target = field.target();
      const id = (nested as { id: number } | null)?.id;
      return { fields: target.fields, values: world(target.name).filter((record) => record.id === id) };
    }
    case 'joined': {
      const target = field.target();
      const key = value[field.column];
      return {
        fields: target.fields,
        values: world(target.name).filter((record) => key != null && record[field.targetColumn] === key),
      };
    }
    case 'column':
      throw new Error(`${name} is a column`);
    default: {
      const unhandled: never = field;
      throw new Error(`unknown field ${JSON.stringify(unhandled)}`);
    }
  }
}

function columnType(fields: FieldMap, name: string): ColumnType {
  const field = fields[name];
  if (field?.kind !== 'column') throw new Error(`${name} is not a column`);
  return field.type;
}

/** SQL's three-valued logic, with "unknown" as `null`; a filter holds only when `true`. */
function holds(type: ColumnType, actual: unknown, filter: Filter): boolean {
  const compare = (expected: unknown): number | null =>
    actual === null || actual === undefined ? null : compareValues(type, actual, expected);
  switch (filter.operator) {
    case '=':
      return filter.value === null ? actual === null : compare(filter.value) === 0;
    case '!=':
      return filter.value === null ? actual !== null : (compare(filter.value) ?? 0) !== 0;
    case '>':
      return (compare(filter.value) ?? 0) > 0;
    case '<':
      return (compare(filter.value) ?? 0) < 0;
    case '>=':
      return (compare(filter.value) ?? -1) >= 0;
    case '<=':
      return (compare(filter.value) ?? 1) <= 0;
    case 'in':
      return filter.value.some((expected) => compare(expected) === 0);
    case 'not in':
      return (
        filter.value.length === 0 ||
        (actual !== null && filter.value.every((expected) => compare(expected) !== 0))
      );
    default: {
      const unhandled: never = filter;
      throw new Error(`unknown operator ${JSON.stringify(unhandled)}`);
    }
  }
}

/** Strings by UTF-8 bytes (C collation), decimals by value, timestamps by instant. */
function compareValues(type: ColumnType, a: unknown, b: unknown): number {
  switch (type) {
    case 'string':
    case 'date':
      return Buffer.compare(Buffer.from(a as string), Buffer.from(b as string));
    case 'integer':
    case 'decimal':
      return Math.sign(Number(a) - Number(b));
    case 'boolean':
      return Number(a) - Number(b);
    case 'timestamp':
      return Math.sign(Date.parse(a as string) - Date.parse(b as string));
    default: {
      const unhandled: never = type;
      throw new Error(`unknown column type ${String(unhandled)}`);
    }
  }
}

function compareForOrder(type: ColumnType, a: unknown, b: unknown, direction: 'asc' | 'desc'): number {
  const aNull = a === null || a === undefined;
  const bNull = b === null || b === undefined;
  // Nulls last ascending, first descending: as if null were greater than every value.
  const order = aNull || bNull ? Number(aNull) - Number(bNull) : compareValues(type, a, b);
  return direction === 'asc' ? order : -order;
}
