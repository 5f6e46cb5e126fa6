import type {
  ColumnDefinition,
  FieldMap,
  JoinedDefinition,
  ListDefinition,
  ModelDefinition,
  ObjectDefinition,
  ReferenceDefinition,
} from './fields.js';

/**
 * How the read model stores one model, derived from its registry entry:
 *
 * - one table per model (`people`), keyed by `id`, with `org_id` and a typed column per scalar field;
 * - one child table per nested list or embedded object (`people__phone_numbers`, `orders__ship_to`,
 *   `shipments__packages__lines`), keyed by the parent's key plus, for lists, the element's `ordinal`
 *   (`record_id`, then `<list>_ordinal` for each list above, then `ordinal`). Embedded objects are
 *   child tables too, holding at most one row, so that dot syntax, "no related record never matches"
 *   and rendering work the same way for `ship_to` as for `lines`;
 * - a reference is a `<name>_id` column; its display fields are joined from the target's table when
 *   rendering, so renaming a phone number type shows at once in every person;
 * - a joined relation stores nothing: dot syntax reaches the target's table through the columns it names;
 * - a model table of a model with `storedDocuments` also keeps each record's rendered JSON in a
 *   `document` column, written with the record, and written again when a reference's display changes.
 */
export interface TableNode {
  /** Unqualified table name. */
  readonly table: string;
  readonly fields: FieldMap;
  /** The columns that identify a row: `['id']` for a model, `['record_id', 'ordinal']` for a list element. */
  readonly keyColumns: readonly string[];
  /** This table's columns holding the parent's `keyColumns`, in the same order (none for a model). */
  readonly parentColumns: readonly string[];
  readonly columns: readonly StoredColumn[];
  readonly references: readonly StoredReference[];
  readonly children: readonly ChildTable[];
  readonly joins: readonly TableJoin[];
  /** Whether rows keep their rendered JSON in a `document` column (model tables only). */
  readonly storesDocument: boolean;
}

export interface TableJoin {
  readonly name: string;
  readonly definition: JoinedDefinition;
}

export interface StoredColumn {
  readonly name: string;
  readonly definition: ColumnDefinition;
}

export interface StoredReference {
  readonly name: string;
  /** The column holding the target's id. */
  readonly column: string;
  readonly definition: ReferenceDefinition;
}

export interface ChildTable {
  readonly name: string;
  readonly definition: ListDefinition | ObjectDefinition;
  readonly node: TableNode;
}

const trees = new WeakMap<ModelDefinition, TableNode>();

/** The read-model tables of a model (cached: the registry is immutable). */
export function tableTree(model: ModelDefinition): TableNode {
  let tree = trees.get(model);
  if (!tree) {
    tree = {
      ...buildNode(model.name, model.name, model.fields, ['id'], []),
      storesDocument: model.storedDocuments,
    };
    trees.set(model, tree);
  }
  return tree;
}

/** `relation` is the name of the list or object the node stores (the model's name for a model). */
function buildNode(
  table: string,
  relation: string,
  fields: FieldMap,
  keyColumns: readonly string[],
  parentColumns: readonly string[],
): TableNode {
  const columns: StoredColumn[] = [];
  const references: StoredReference[] = [];
  const children: ChildTable[] = [];
  const joins: TableJoin[] = [];
  for (const [name, definition] of Object.entries(fields)) {
    switch (definition.kind) {
      case 'column':
        columns.push({ name, definition });
        break;
      case 'reference':
        references.push({ name, column: `${name}_id`, definition });
        break;
      case 'joined':
        joins.push({ name, definition });
        break;
      case 'list':
      case 'object': {
        const childParentColumns = keyColumns.map((key) =>
          key === 'id' ? 'record_id' : key === 'ordinal' ? `${relation}_ordinal` : key,
        );
        const childKey = definition.kind === 'list' ? [...childParentColumns, 'ordinal'] : childParentColumns;
        // A path that passes the same list name twice would give two `<name>_ordinal` columns.
        if (new Set(childKey).size !== childKey.length)
          throw new Error(`${table}.${name}: nested lists share a name`);
        const node = buildNode(`${table}__${name}`, name, definition.fields, childKey, childParentColumns);
        children.push({ name, definition, node });
        break;
      }
      default: {
        const unhandled: never = definition;
        throw new Error(`unknown field kind ${JSON.stringify(unhandled)}`);
      }
    }
  }
  return {
    table,
    fields,
    keyColumns,
    parentColumns,
    columns,
    references,
    children,
    joins,
    storesDocument: false,
  };
}

/** Rows of a model are keyed by its bigint `id`; child rows add integer ordinals to the `record_id`. */
export function keyColumnType(key: string): 'bigint' | 'integer' {
  return key === 'id' || key === 'record_id' ? 'bigint' : 'integer';
}
