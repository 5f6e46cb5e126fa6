import type pg from 'pg';
import { INT32, type ColumnDefinition, type ColumnType } from './fields.js';
import type { TableNode } from './tables.js';

/** Anything that runs a query: a pool, or a client inside the caller's transaction. */
export type Queryable = Pick<pg.ClientBase, 'query'>;

/** One parameterized statement; values reach Postgres only as `$n` parameters. */
export interface CompiledQuery {
  readonly text: string;
  readonly values: unknown[];
}

/** The schema searches read from (the read model's contract, `read-model.ts`). */
export const READ_SCHEMA = 'read';

/** Where the read-model tables live. */
export interface ReadModelOptions {
  /** Postgres schema of the read-model tables; {@link READ_SCHEMA} unless told otherwise. */
  readonly schema?: string;
}

/**
 * The Postgres type of a column type's values in statements (parameters are cast to it; a column's
 * own, narrower type then refuses, rather than silently cuts, what it cannot hold).
 */
export function sqlType(type: ColumnType): string {
  switch (type) {
    case 'string':
      return 'text';
    case 'integer':
      return 'bigint';
    case 'decimal':
      return 'numeric';
    case 'boolean':
      return 'boolean';
    case 'date':
      return 'date';
    case 'timestamp':
      return 'timestamptz';
    default: {
      const unhandled: never = type;
      throw new Error(`unknown column type ${String(unhandled)}`);
    }
  }
}

/**
 * The read model's type of a column, holding exactly what its registry bounds allow (API.md §1):
 * `character varying(maxLength)`, `integer` or `bigint` by the bounds, `numeric(p, s)` of the digits.
 * Written as `format_type` spells it, so that the layout script can compare it with the catalog.
 */
export function columnSqlType(column: ColumnDefinition): string {
  switch (column.type) {
    case 'string':
      return `character varying(${column.maxLength})`;
    case 'integer':
      return column.min >= INT32.min && column.max <= INT32.max ? 'integer' : 'bigint';
    case 'decimal':
      return `numeric(${column.integerDigits + column.scale},${column.scale})`;
    case 'boolean':
    case 'date':
      return column.type;
    case 'timestamp':
      return 'timestamp with time zone';
    default: {
      const unhandled: never = column;
      throw new Error(`unknown column type ${JSON.stringify(unhandled)}`);
    }
  }
}

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

/** A double-quoted identifier. Only lower-case names are accepted, so nothing can be smuggled in. */
export function quoteIdentifier(name: string): string {
  if (!IDENTIFIER.test(name) || name.length > 63) throw new Error(`not a safe SQL identifier: ${name}`);
  return `"${name}"`;
}

export function qualifiedTable(options: ReadModelOptions, table: string): string {
  return `${quoteIdentifier(options.schema ?? READ_SCHEMA)}.${quoteIdentifier(table)}`;
}

/** `alias.column`, quoted. */
export function columnOf(alias: string, column: string): string {
  return `${alias}.${quoteIdentifier(column)}`;
}

/** The condition tying a child table's rows (as `childAlias`) to their parent's row (as `parentAlias`). */
export function parentJoin(
  parent: TableNode,
  parentAlias: string,
  child: TableNode,
  childAlias: string,
): string {
  return child.parentColumns
    .map(
      (column, index) =>
        `${columnOf(childAlias, column)} = ${columnOf(parentAlias, parent.keyColumns[index]!)}`,
    )
    .join(' AND ');
}

/** Collects parameter values while a statement is being built. */
export class SqlParameters {
  readonly values: unknown[] = [];

  /** The placeholder of a new parameter holding `value`. */
  add(value: unknown): string {
    this.values.push(value);
    return `$${this.values.length}`;
  }
}

/** Hands out table aliases unique within one statement, so nested subqueries never shadow each other. */
export class TableAliases {
  private count = 0;

  next(): string {
    return `t${this.count++}`;
  }
}
