import type { ColumnDefinition, ReferenceDefinition } from './fields.js';
import {
  columnOf,
  parentJoin,
  qualifiedTable,
  quoteIdentifier,
  TableAliases,
  type ReadModelOptions,
  type SqlParameters,
} from './sql.js';
import { tableTree, type TableNode } from './tables.js';

/** What every rendering subquery needs: where tables live, the org parameter, fresh aliases. */
export interface RenderContext {
  readonly options: ReadModelOptions;
  /** The placeholder of the organization id: every table access is filtered by it. */
  readonly org: string;
  readonly aliases: TableAliases;
  /**
   * The row has no child rows (one being inserted): its lists render as `[]` and its objects as null,
   * with no subquery reading their tables.
   */
  readonly childless?: boolean;
}

/** A context for one statement, whose first parameter is the organization id. */
export function renderContext(
  options: ReadModelOptions,
  params: SqlParameters,
  orgId: number,
): RenderContext {
  return { options, org: `${params.add(orgId)}::bigint`, aliases: new TableAliases() };
}

/** The column of a model table holding each record's rendered JSON (see `TableNode.storesDocument`). */
export const DOCUMENT_COLUMN = 'document';

/** The JSON of row `alias` of a model table: its stored document, or rendered now if it keeps none. */
export function recordJson(root: TableNode, alias: string, context: RenderContext): string {
  return root.storesDocument ? columnOf(alias, DOCUMENT_COLUMN) : renderRow(root, alias, context);
}

/**
 * An `UPDATE` rendering the documents of the rows of model table `root` that `condition` selects
 * (given the row's alias). Each row is rendered in its own organization, so one statement may span
 * several.
 */
export function renderDocumentsStatement(
  root: TableNode,
  options: ReadModelOptions,
  condition: (alias: string) => string,
): string {
  const aliases = new TableAliases();
  const alias = aliases.next();
  const context: RenderContext = { options, org: `${alias}.org_id`, aliases };
  return `UPDATE ${qualifiedTable(options, root.table)} ${alias}
SET ${quoteIdentifier(DOCUMENT_COLUMN)} = ${renderRow(root, alias, context)}
WHERE ${condition(alias)}`;
}

/**
 * A SQL expression building the JSON of the row `alias` of `node` exactly as the API returns it:
 * keys in registry order, nested lists as arrays in their order, embedded objects, references as
 * `{id, ...display}` read from the target's current row (null where there is none, or it was deleted).
 * Joined relations are not rendered.
 */
export function renderRow(node: TableNode, alias: string, context: RenderContext): string {
  const pairs = Object.entries(node.fields).flatMap(([name, field]): [string, string][] => {
    switch (field.kind) {
      case 'column':
        return [[name, renderColumn(columnOf(alias, name), field)]];
      case 'reference':
        return [[name, renderReference(columnOf(alias, `${name}_id`), field, context)]];
      case 'list':
      case 'object': {
        if (context.childless) return [[name, field.kind === 'list' ? `'[]'::json` : 'NULL::json']];
        const child = node.children.find((candidate) => candidate.name === name)!.node;
        return [[name, renderChild(node, alias, child, field.kind, context)]];
      }
      case 'joined':
        return [];
      default: {
        const unhandled: never = field;
        throw new Error(`unknown field kind ${JSON.stringify(unhandled)}`);
      }
    }
  });
  return jsonObject(pairs, context);
}

/**
 * A JSON object of `[key, SQL expression]` pairs, in their order and compact (`{"id":1,"name":"Work"}`):
 * `row_to_json` of a row of those columns. (`json_build_object` would write `"id" : 1`, and jsonb would
 * sort the keys.)
 */
function jsonObject(pairs: readonly (readonly [string, string])[], context: RenderContext): string {
  const row = context.aliases.next();
  const columns = pairs.map(([key, expression]) => `${expression} AS ${quoteIdentifier(key)}`);
  return `(SELECT row_to_json(${row}) FROM (SELECT ${columns.join(', ')}) ${row})`;
}

/**
 * An aggregate: the compact JSON array (as text) of the JSON `expression` over the rows, in `order`,
 * without the separators `json_agg` writes (", " and line breaks).
 */
export function jsonArrayText(expression: string, order: string): string {
  return `coalesce('[' || string_agg((${expression})::text, ',' ORDER BY ${order}) || ']', '[]')`;
}

/** Values in their API form (API.md §1): decimals as strings, RFC 3339 UTC timestamps, ISO dates. */
function renderColumn(expression: string, column: ColumnDefinition): string {
  switch (column.type) {
    case 'string':
    case 'integer':
    case 'boolean':
      return expression;
    case 'decimal':
      return decimalText(expression, column.minScale);
    case 'date':
      return `to_char(${expression}, 'YYYY-MM-DD')`;
    case 'timestamp':
      return `to_char(${expression} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
    default: {
      const unhandled: never = column;
      throw new Error(`unknown column type ${JSON.stringify(unhandled)}`);
    }
  }
}

/**
 * A `numeric(p, s)` value as the API writes it (`canonicalDecimal`): at least `minScale` digits after
 * the point, and the further ones only when they are not zero (`12.5000` → `"12.50"`, `12.1250` → `"12.125"`).
 */
function decimalText(expression: string, minScale: number): string {
  return `(CASE WHEN scale(trim_scale(${expression})) <= ${minScale} THEN round(${expression}, ${minScale}) ELSE trim_scale(${expression}) END)::text`;
}

function renderReference(idColumn: string, reference: ReferenceDefinition, context: RenderContext): string {
  const target = tableTree(reference.target());
  const alias = context.aliases.next();
  const pairs: [string, string][] = [['id', columnOf(alias, 'id')]];
  for (const name of reference.display) {
    const field = target.fields[name];
    if (field?.kind !== 'column') throw new Error(`${target.table}.${name} is not a column to display`);
    pairs.push([name, renderColumn(columnOf(alias, name), field)]);
  }
  // Null when the record referenced no longer exists (deleted since), as for none.
  return (
    `(SELECT ${jsonObject(pairs, context)} FROM ${qualifiedTable(context.options, target.table)} ${alias}` +
    ` WHERE ${alias}.org_id = ${context.org} AND ${alias}.id = ${idColumn})`
  );
}

function renderChild(
  parent: TableNode,
  parentAlias: string,
  child: TableNode,
  kind: 'list' | 'object',
  context: RenderContext,
): string {
  const alias = context.aliases.next();
  const from = `FROM ${qualifiedTable(context.options, child.table)} ${alias}
  WHERE ${alias}.org_id = ${context.org} AND ${parentJoin(parent, parentAlias, child, alias)}`;
  const row = renderRow(child, alias, context);
  return kind === 'list'
    ? `(SELECT (${jsonArrayText(row, `${alias}.ordinal`)})::json ${from})`
    : `(SELECT ${row} ${from})`;
}
