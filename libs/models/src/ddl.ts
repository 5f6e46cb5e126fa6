import { createHash } from 'node:crypto';
import { RECORD_ID, RECORD_METADATA, type ColumnDefinition, type ModelDefinition } from './fields.js';
import { DOCUMENT_COLUMN, renderDocumentsStatement } from './render.js';
import { READ_SCHEMA, columnSqlType, qualifiedTable, quoteIdentifier, type ReadModelOptions } from './sql.js';
import { keyColumnType, tableTree, type StoredColumn, type TableNode } from './tables.js';

/** Deleted records, so that a late or repeated older event cannot bring one back. */
export const DELETED_RECORDS_TABLE = 'deleted_records';

/**
 * Records per model and organization, kept by the projection writes, so that a search without
 * filters answers `total_results` without counting every row of the organization.
 */
export const RECORD_COUNTS_TABLE = 'record_counts';

/**
 * Longer strings are not indexed: a B-tree entry must stay under about 2.7 kB, and 500 characters of
 * 4-byte UTF-8 plus the key columns fit. Filters on such columns (`items.description`) scan the org.
 */
const MAX_INDEXED_STRING_LENGTH = 500;

/**
 * The read-model DDL of `models` (see `TableNode` for the layout), as one idempotent script: run it at
 * every start. Columns are added with `ADD COLUMN IF NOT EXISTS`, so a field added to the registry
 * appears without a rebuild, and a column whose type differs from its declaration's (`columnSqlType`:
 * its bounds changed) is altered to it, unless rows hold values the new type cannot: the table then
 * keeps its types, with a warning (see `retypeColumns`). A removed field needs the read model rebuilt.
 *
 * Only key and metadata columns are `NOT NULL`: required-ness is the command side's rule, and a field
 * becoming required later must not make old events unprojectable.
 *
 * Indexes: `(org_id, id)`; per model column `(org_id, column, id)` and `(org_id, column DESC, id)`,
 * which give both sort directions with the `id asc` tie-break straight from the index; per child
 * column and reference `(org_id, column, record_id)`, so a dotted filter can start from the children.
 * Unique fields get an ordinary index: uniqueness is enforced when commands are decided.
 *
 * Stored documents (`TableNode.storesDocument`): the `document` column is written right after its row,
 * so model tables leave room on each page (`fillfactor`) for that update to stay on the page and skip
 * the indexes. The script adds the column to a table from before documents and renders its rows
 * then, once (at the end, when every table a rendering reads exists), not at every start.
 */
export function readModelDdl(models: readonly ModelDefinition[], options: ReadModelOptions = {}): string {
  const schema = quoteIdentifier(options.schema ?? READ_SCHEMA);
  const statements = [
    `CREATE SCHEMA IF NOT EXISTS ${schema}`,
    `CREATE TABLE IF NOT EXISTS ${qualifiedTable(options, DELETED_RECORDS_TABLE)} (
  model text COLLATE "C" NOT NULL,
  id bigint NOT NULL,
  org_id bigint NOT NULL,
  version bigint NOT NULL,
  PRIMARY KEY (model, id)
)`,
    `CREATE TABLE IF NOT EXISTS ${qualifiedTable(options, RECORD_COUNTS_TABLE)} (
  model text COLLATE "C" NOT NULL,
  org_id bigint NOT NULL,
  count bigint NOT NULL,
  PRIMARY KEY (model, org_id)
)`,
  ];
  const roots = models.map(tableTree);
  models.forEach((model, i) => statements.push(...modelTables(roots[i]!, model.indexed, options)));
  for (const root of roots.filter(({ storesDocument }) => storesDocument))
    statements.push(documentColumn(root, options));
  return `${statements.join(';\n')};\n`;
}

function modelTables(root: TableNode, indexed: boolean, options: ReadModelOptions): string[] {
  const index = (...parts: string[]): string[] => (indexed ? [createIndex(root.table, table, parts)] : []);
  const table = qualifiedTable(options, root.table);
  const metadata = root.columns.filter(
    ({ name }) => name !== RECORD_ID && Object.hasOwn(RECORD_METADATA, name),
  );
  const required = metadata.filter(({ definition }) => !definition.nullable);
  const statements = [
    `CREATE TABLE IF NOT EXISTS ${table} (
  id bigint PRIMARY KEY,
  org_id bigint NOT NULL${required.map(({ name, definition }) => `,\n  ${columnDdl(name, definition)} NOT NULL`).join('')}
)${root.storesDocument ? ' WITH (fillfactor = 85)' : ''}`,
    ...index('org_id', 'id'),
  ];
  for (const { name, definition } of root.columns) {
    if (name === RECORD_ID) continue;
    if (!required.some((column) => column.name === name))
      statements.push(`ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS ${columnDdl(name, definition)}`);
    if (isIndexable(definition))
      statements.push(...index('org_id', name, 'id'), ...index('org_id', `${name} DESC`, 'id'));
  }
  statements.push(
    retypeColumns(
      table,
      root.columns.filter(({ name }) => name !== RECORD_ID),
    ),
  );
  statements.push(...referenceColumns(root, table, 'id', indexed));
  statements.push(vacuumedOften(table));
  for (const child of root.children) statements.push(...childTables(root, child.node, indexed, options));
  return statements;
}

function childTables(
  parent: TableNode,
  node: TableNode,
  indexed: boolean,
  options: ReadModelOptions,
): string[] {
  const table = qualifiedTable(options, node.table);
  const keys = node.keyColumns.map((key) => `  ${quoteIdentifier(key)} ${keyColumnType(key)} NOT NULL`);
  const statements = [
    `CREATE TABLE IF NOT EXISTS ${table} (
  org_id bigint NOT NULL,
${keys.join(',\n')},
  PRIMARY KEY (${node.keyColumns.map(quoteIdentifier).join(', ')}),
  FOREIGN KEY (${node.parentColumns.map(quoteIdentifier).join(', ')})
    REFERENCES ${qualifiedTable(options, parent.table)} (${parent.keyColumns.map(quoteIdentifier).join(', ')})
    ON DELETE CASCADE
)`,
  ];
  for (const { name, definition } of node.columns) {
    statements.push(`ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS ${columnDdl(name, definition)}`);
    if (indexed && isIndexable(definition))
      statements.push(createIndex(node.table, table, ['org_id', name, 'record_id']));
  }
  statements.push(retypeColumns(table, node.columns));
  statements.push(...referenceColumns(node, table, 'record_id', indexed));
  statements.push(vacuumedOften(table));
  for (const child of node.children) statements.push(...childTables(node, child.node, indexed, options));
  return statements;
}

/** The `<name>_id` columns of references. No foreign key: models are projected independently. */
function referenceColumns(node: TableNode, table: string, rowColumn: string, indexed: boolean): string[] {
  return node.references.flatMap(({ column }) => [
    `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS ${quoteIdentifier(column)} bigint`,
    ...(indexed ? [createIndex(node.table, table, ['org_id', column, rowColumn])] : []),
  ]);
}

/**
 * Autovacuum after 1% of a table's rows changed or were added, not Postgres's default 20%. Index-only
 * scans (counts, the pages of `in` lists, order columns) skip the table only on pages the visibility
 * map marks all-visible, and every projected write clears its page's mark until a vacuum sets it
 * again: at 20%, a table of 2,000,000 records waits for 400,000 changes, and a count of 4,000
 * matches made 1,951 table reads (issue 25). Each vacuum visits only the pages changed since the last
 * (the map says which), so vacuuming often costs little. Set where not yet set, so that a start does
 * not queue behind a running autovacuum's lock.
 */
function vacuumedOften(table: string): string {
  const settings = VACUUM_SETTINGS.map((setting) => `'${setting}'`).join(', ');
  return `DO $$ BEGIN
  IF NOT coalesce((SELECT reloptions @> ARRAY[${settings}] FROM pg_class WHERE oid = '${table}'::regclass), false) THEN
    ALTER TABLE ${table} SET (${VACUUM_SETTINGS.join(', ')}); END IF; END $$`;
}

const VACUUM_SETTINGS = ['autovacuum_vacuum_scale_factor=0.01', 'autovacuum_vacuum_insert_scale_factor=0.01'];

/** The `document` column, added and filled in one go where the table lacks it. */
function documentColumn(root: TableNode, options: ReadModelOptions): string {
  const table = qualifiedTable(options, root.table);
  const column = quoteIdentifier(DOCUMENT_COLUMN);
  const render = renderDocumentsStatement(root, options, () => 'true');
  return `DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_attribute
                  WHERE attrelid = '${table}'::regclass AND attname = '${DOCUMENT_COLUMN}' AND NOT attisdropped) THEN
    ALTER TABLE ${table} ADD COLUMN ${column} json; ${render}; END IF; END $$`;
}

function columnDdl(name: string, definition: ColumnDefinition): string {
  return `${quoteIdentifier(name)} ${typeDdl(definition)}`;
}

function typeDdl(definition: ColumnDefinition): string {
  // Byte-order comparison and sorting of strings (API.md §4), whatever the database's default collation.
  const collation = definition.type === 'string' ? ' COLLATE "C"' : '';
  return `${columnSqlType(definition)}${collation}`;
}

/**
 * Alters the columns whose type in the catalog is not their declaration's (a read model laid out
 * before the bounds, or before a bound changed) in one `ALTER TABLE`, so that the table is rewritten
 * once. When a row holds a value the new types cannot (written before the bounds: a quantity beyond
 * 32 bits), the table keeps its types and Postgres logs a warning: the wider types still hold
 * everything a write accepts now.
 */
function retypeColumns(table: string, columns: readonly StoredColumn[]): string {
  const wanted = columns
    .map(
      ({ name, definition }) =>
        `(${literal(name)}, ${literal(columnSqlType(definition))}, ${literal(typeDdl(definition))})`,
    )
    .join(', ');
  // No line ends in a semicolon inside the block: the script's statements are separated by ';\n'.
  return `DO $$ DECLARE changes varchar; BEGIN
  SELECT string_agg(format('ALTER COLUMN %I TYPE %s', c.name, c.ddl), ', ') INTO changes
    FROM (VALUES ${wanted}) AS c(name, type, ddl)
    JOIN pg_attribute a ON a.attrelid = '${table}'::regclass AND a.attname = c.name AND NOT a.attisdropped
   WHERE format_type(a.atttypid, a.atttypmod) <> c.type; IF changes IS NOT NULL THEN
    BEGIN EXECUTE 'ALTER TABLE ${table} ' || changes; EXCEPTION WHEN data_exception THEN
      RAISE WARNING 'read model table ${table} keeps its column types: %; its rows hold values beyond the new bounds (%)', changes, SQLERRM; END; END IF; END $$`;
}

/** A string literal of a name or type the registry declares (identifiers and digits only). */
function literal(value: string): string {
  if (!/^[\w ,()"]+$/.test(value)) throw new Error(`not a safe literal: ${value}`);
  return `'${value}'`;
}

/** Whether a column has indexes (see `readModelDdl`): every one but strings longer than 500 characters. */
export function isIndexable(definition: ColumnDefinition): boolean {
  return definition.type !== 'string' || definition.maxLength <= MAX_INDEXED_STRING_LENGTH;
}

/** `parts` are column names, optionally followed by ` DESC`. */
function createIndex(tableName: string, table: string, parts: readonly string[]): string {
  const columns = parts.map((part) => {
    const [column, direction] = part.split(' ');
    return `${quoteIdentifier(column!)}${direction ? ` ${direction}` : ''}`;
  });
  return `CREATE INDEX IF NOT EXISTS ${quoteIdentifier(indexName(tableName, parts))} ON ${table} (${columns.join(', ')})`;
}

/**
 * Postgres cuts identifiers at 63 bytes, and `IF NOT EXISTS` would then skip a different index that
 * happens to share the cut name; long names end in a hash of the full name instead.
 */
function indexName(tableName: string, parts: readonly string[]): string {
  const name = `ix_${tableName}__${parts.map((part) => part.replace(' DESC', '_desc')).join('__')}`;
  if (name.length <= 63) return name;
  return `${name.slice(0, 50)}_${createHash('sha256').update(name).digest('hex').slice(0, 12)}`;
}
