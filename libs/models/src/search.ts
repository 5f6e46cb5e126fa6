import { RECORD_COUNTS_TABLE, isIndexable } from './ddl.js';
import { RECORD_ID, type ModelDefinition } from './fields.js';
import type { RecordDocument } from './projection.js';
import type { Filter, OrderTerm, SearchQuery } from './query.js';
import { jsonArrayText, recordJson, renderContext, type RenderContext } from './render.js';
import {
  columnOf,
  parentJoin,
  qualifiedTable,
  sqlType,
  SqlParameters,
  type CompiledQuery,
  type Queryable,
  type ReadModelOptions,
} from './sql.js';
import { tableTree, type TableNode } from './tables.js';

/** The one row a compiled search returns. */
export interface SearchRowText {
  /** All matches, ignoring limit and offset. */
  readonly total_results: number;
  /** Records on the page. */
  readonly count: number;
  /** The page, in order, already rendered: the text of a JSON array. */
  readonly results: string;
}

/** A search's row with its page parsed. */
export interface SearchRow extends Omit<SearchRowText, 'results'> {
  readonly results: RecordDocument[];
}

/**
 * Compiles a search into one statement returning one `SearchRow`. An index can supply the page's
 * order, and the limit stops the scan; only the page's rows are read as documents (or rendered, see
 * `recordJson`).
 * The count runs over the same conditions (see `countStatement` for the shortcuts it takes). The
 * page hangs off the count, so an offset past the end still answers `total_results`.
 *
 * Conditions: every table access is filtered by `org_id`; root filters compare the row's columns;
 * dotted filters become `EXISTS` subqueries, one per relation: filters whose operands start with the
 * same relation share one subquery, so they are tested against the same related record, and the
 * rest of their paths are grouped the same way inside it.
 */
export function compileSearch(
  model: ModelDefinition,
  orgId: number,
  query: SearchQuery,
  options: ReadModelOptions = {},
): CompiledQuery {
  const params = new SqlParameters();
  const context = renderContext(options, params, orgId);
  const root = tableTree(model);
  const table = qualifiedTable(options, root.table);
  const alias = context.aliases.next();
  const driving = listDrivingThePage(model, root, query);
  const pending = query.filters
    .filter((filter) => filter !== driving)
    .map((filter) => ({ relations: filter.relations, filter }));
  const list = driving && listParameter(driving, params);
  const others = conditions(root, alias, pending, params, context);
  const where = [
    `${alias}.org_id = ${context.org}`,
    ...(driving ? [`${columnOf(alias, driving.column)} = ANY(${list})`] : []),
    ...others,
  ].join('\n    AND ');
  const limit = `${params.add(query.limit)}::bigint`;
  const offset = `${params.add(query.offset)}::bigint`;
  const rendered = context.aliases.next();
  const total = countStatement(
    model,
    root,
    query.filters,
    `FROM ${table} ${alias}\n  WHERE ${where}`,
    params,
    context,
  );
  // The first page reads its documents with its rows. A later one, or one read value by value, picks
  // ids first (so that an offset skips index entries rather than rows, and no document is read for a
  // row that does not make the page), then reads the documents of those ids.
  const direct = root.storesDocument && query.offset === 0 && driving === undefined;
  const orderColumns = [...new Set(query.order.map(({ column }) => column))].filter((c) => c !== 'id');
  const pageColumns = [
    `${alias}.id`,
    ...orderColumns.map((column) => columnOf(alias, column)),
    ...(direct ? [`${recordJson(root, alias, context)} AS document`] : []),
  ];
  // Value by value: each value's first rows in the page's order, `limit + offset` of them at most,
  // straight from the (org_id, column, id) index; the page is the first of all those. Every match
  // has one value, so the page is among them.
  const source = driving
    ? `(SELECT DISTINCT value FROM unnest(${list}) AS v(value)) ${rendered},
    LATERAL (SELECT ${pageColumns.join(', ')} FROM ${table} ${alias}
      WHERE ${[`${alias}.org_id = ${context.org}`, `${columnOf(alias, driving.column)} = ${rendered}.value`, ...others].join('\n      AND ')}
      ORDER BY ${orderBy(query.order, alias)}
      LIMIT ${limit} + ${offset}) ${alias}`
    : `${table} ${alias}
  WHERE ${where}`;
  // The page comes back as text: its documents are valid JSON, and parsing the whole array again as
  // `json` would cost Postgres more than the rest of a cheap search.
  const shown = direct
    ? `SELECT count(*)::int AS count, ${jsonArrayText('page.document', orderBy(query.order, 'page'))} AS results
  FROM page`
    : `SELECT count(*)::int AS count,
    ${jsonArrayText(recordJson(root, rendered, context), orderBy(query.order, 'page'))} AS results
  FROM page JOIN ${table} ${rendered} ON ${rendered}.id = page.id AND ${rendered}.org_id = ${context.org}`;
  const text = `WITH page AS (
  SELECT ${pageColumns.join(', ')} FROM ${source}
  ORDER BY ${orderBy(query.order, alias)}
  LIMIT ${limit} OFFSET ${offset}
), total AS (
  ${total}
)
SELECT total.total_results, shown.count, shown.results FROM total, (
  ${shown}
) shown`;
  return { text, values: params.values };
}

/**
 * Compiles the lookup of one record by id, rendered like a search result (`record`), with its
 * `version`; no row when there is none.
 */
export function compileGet(
  model: ModelDefinition,
  orgId: number,
  id: number,
  options: ReadModelOptions = {},
): CompiledQuery {
  const params = new SqlParameters();
  const context = renderContext(options, params, orgId);
  const root = tableTree(model);
  const alias = context.aliases.next();
  const text = `SELECT ${alias}.version, ${recordJson(root, alias, context)} AS record
FROM ${qualifiedTable(options, root.table)} ${alias}
WHERE ${alias}.org_id = ${context.org} AND ${alias}.id = ${params.add(id)}::bigint`;
  return { text, values: params.values };
}

/** Runs a compiled search: one round trip. */
export async function searchRecords(
  db: Queryable,
  model: ModelDefinition,
  orgId: number,
  query: SearchQuery,
  options: ReadModelOptions = {},
): Promise<SearchRow> {
  const { rows } = await db.query<SearchRowText>(compileSearch(model, orgId, query, options));
  const row = rows[0]!;
  return { ...row, results: JSON.parse(row.results) as RecordDocument[] };
}

/** Reads one record of the organization, or `undefined` (another organization's record included). */
export async function getRecord(
  db: Queryable,
  model: ModelDefinition,
  orgId: number,
  id: number,
  options: ReadModelOptions = {},
): Promise<RecordDocument | undefined> {
  const { rows } = await db.query<{ record: RecordDocument }>(compileGet(model, orgId, id, options));
  return rows[0]?.record;
}

/**
 * Earlier terms take precedence and `id asc` breaks the remaining ties (API.md §4). Nulls last for
 * `asc` and first for `desc` is also how a B-tree index reads forwards and backwards.
 */
function orderBy(order: readonly OrderTerm[], alias: string): string {
  const terms = order.map(({ column, direction }) =>
    direction === 'asc'
      ? `${columnOf(alias, column)} ASC NULLS LAST`
      : `${columnOf(alias, column)} DESC NULLS FIRST`,
  );
  const idDecided = order.some(({ column }) => column === 'id');
  return [...terms, ...(idDecided ? [] : [`${alias}.id ASC`])].join(', ');
}

/**
 * The `in` filter whose values the page is read by, one value after the other, if any: a list of a
 * model column with an index (`(org_id, column, id)`), when the page's order, that column being fixed,
 * is by id. Filtered in id order otherwise, a page walks the primary key past every non-matching row
 * until it has `limit` matches: in a large organization, most of the table when the values are rare
 * or their records recent. The shortest such list is taken.
 */
function listDrivingThePage(
  model: ModelDefinition,
  root: TableNode,
  query: SearchQuery,
): (Filter & { operator: 'in' }) | undefined {
  if (!model.indexed) return undefined;
  /** Whether the page's order is by id once `column` is fixed (the tie-break, or an order term). */
  const byIdOnceFixed = (column: string): boolean => {
    const first = query.order.find((term) => term.column !== column);
    return first === undefined || first.column === RECORD_ID;
  };
  const lists = query.filters.filter(
    (filter): filter is Filter & { operator: 'in' } =>
      filter.operator === 'in' &&
      filter.relations.length === 0 &&
      filter.column !== RECORD_ID &&
      filter.value.length > 1 &&
      root.columns.some(({ name, definition }) => name === filter.column && isIndexable(definition)) &&
      byIdOnceFixed(filter.column),
  );
  return lists.sort((a, b) => a.value.length - b.value.length)[0];
}

/** The `$n::type[]` of an `in` or `not in` filter's values. */
function listParameter(filter: Filter & { operator: 'in' | 'not in' }, params: SqlParameters): string {
  return `${params.add(filter.value)}::${sqlType(filter.type)}[]`;
}

/** A filter and the relations it has still to follow from the table at hand. */
interface PendingFilter {
  readonly relations: readonly string[];
  readonly filter: Filter;
}

/**
 * The statement counting the matches. Counting is what makes an unselective search slow in a large
 * organization, so two shapes take shortcuts: without filters the count is read from the counts the
 * projection keeps; when every filter follows the same nested list (or embedded object), the count is
 * the number of distinct parents among the matching child rows, which spares a semi-join against the
 * model's table (a child row always has its parent, in its organization: the foreign key cascades).
 */
function countStatement(
  model: ModelDefinition,
  root: TableNode,
  filters: readonly Filter[],
  fromWhere: string,
  params: SqlParameters,
  context: RenderContext,
): string {
  if (filters.length === 0)
    return `SELECT coalesce((SELECT count FROM ${qualifiedTable(context.options, RECORD_COUNTS_TABLE)}
    WHERE model = ${params.add(model.name)} AND org_id = ${context.org}), 0)::int AS total_results`;
  const { own, byRelation } = splitByRelation(
    filters.map((filter) => ({ relations: filter.relations, filter })),
  );
  const [only, ...others] = byRelation;
  const child = only && root.children.find(({ name }) => name === only[0]);
  if (own.length > 0 || others.length > 0 || !child)
    return `SELECT count(*)::int AS total_results ${fromWhere}`;
  const alias = context.aliases.next();
  const where = [
    `${alias}.org_id = ${context.org}`,
    ...conditions(child.node, alias, only[1], params, context),
  ];
  return `SELECT count(DISTINCT ${alias}.record_id)::int AS total_results
  FROM ${qualifiedTable(context.options, child.node.table)} ${alias}
  WHERE ${where.join(' AND ')}`;
}

/** Filters on the table at hand, and the others by the relation they follow next. */
function splitByRelation(filters: readonly PendingFilter[]): {
  own: Filter[];
  byRelation: Map<string, PendingFilter[]>;
} {
  const own: Filter[] = [];
  const byRelation = new Map<string, PendingFilter[]>();
  for (const { relations, filter } of filters) {
    const [relation, ...rest] = relations;
    if (relation === undefined) own.push(filter);
    else byRelation.set(relation, [...(byRelation.get(relation) ?? []), { relations: rest, filter }]);
  }
  return { own, byRelation };
}

/** The conditions on row `alias` of `node`: its own columns, then one `EXISTS` per relation followed. */
function conditions(
  node: TableNode,
  alias: string,
  filters: readonly PendingFilter[],
  params: SqlParameters,
  context: RenderContext,
): string[] {
  const { own, byRelation } = splitByRelation(filters);
  const related = [...byRelation].map(([relation, members]) => {
    const inner = context.aliases.next();
    const { target, join } = relatedTable(node, alias, relation, inner);
    const where = [
      `${inner}.org_id = ${context.org}`,
      join,
      ...conditions(target, inner, members, params, context),
    ];
    return `EXISTS (SELECT 1 FROM ${qualifiedTable(context.options, target.table)} ${inner} WHERE ${where.join(' AND ')})`;
  });
  return [...own.map((filter) => comparison(columnOf(alias, filter.column), filter, params)), ...related];
}

/** The table a relation leads to and the condition tying its row `inner` to row `alias` of `node`. */
function relatedTable(
  node: TableNode,
  alias: string,
  relation: string,
  inner: string,
): { target: TableNode; join: string } {
  const child = node.children.find(({ name }) => name === relation);
  if (child) return { target: child.node, join: parentJoin(node, alias, child.node, inner) };
  const reference = node.references.find(({ name }) => name === relation);
  if (reference)
    return {
      target: tableTree(reference.definition.target()),
      join: `${inner}.id = ${columnOf(alias, reference.column)}`,
    };
  const joined = node.joins.find(({ name }) => name === relation);
  if (joined)
    return {
      target: tableTree(joined.definition.target()),
      join: `${columnOf(inner, joined.definition.targetColumn)} = ${columnOf(alias, joined.definition.column)}`,
    };
  throw new Error(`${node.table} has no relation ${relation}: the query was not parsed against this model`);
}

/**
 * SQL semantics throughout (API.md §4): a NULL column satisfies no comparison with a value, `!=` and
 * `not in` included; `= null` and `!= null` ask for NULL; `= ANY('{}')` is false and `<> ALL('{}')`
 * true, which is what `in []` and `not in []` mean.
 */
function comparison(column: string, filter: Filter, params: SqlParameters): string {
  const type = sqlType(filter.type);
  switch (filter.operator) {
    case '=':
      return filter.value === null ? `${column} IS NULL` : `${column} = ${params.add(filter.value)}::${type}`;
    case '!=':
      return filter.value === null
        ? `${column} IS NOT NULL`
        : `${column} <> ${params.add(filter.value)}::${type}`;
    case '>':
    case '<':
    case '>=':
    case '<=':
      return `${column} ${filter.operator} ${params.add(filter.value)}::${type}`;
    case 'in':
      return `${column} = ANY(${listParameter(filter, params)})`;
    case 'not in':
      return `${column} <> ALL(${listParameter(filter, params)})`;
    default: {
      const unhandled: never = filter;
      throw new Error(`unknown operator ${JSON.stringify(unhandled)}`);
    }
  }
}
