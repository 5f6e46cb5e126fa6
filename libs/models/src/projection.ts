import { prepared } from '@ofp/runtime';
import type { ModelDefinition } from './fields.js';
import { DELETED_RECORDS_TABLE, RECORD_COUNTS_TABLE } from './ddl.js';
import { MODELS } from './registry.js';
import { checkpointAdvance } from './read-model.js';
import { DOCUMENT_COLUMN, renderDocumentsStatement, renderRow } from './render.js';
import {
  READ_SCHEMA,
  TableAliases,
  columnSqlType,
  qualifiedTable,
  quoteIdentifier,
  sqlType,
  SqlParameters,
  type CompiledQuery,
  type Queryable,
  type ReadModelOptions,
} from './sql.js';
import { keyColumnType, tableTree, type TableNode } from './tables.js';

/** A record as the API returns it (API.md §6): `id`, `version`, fields, nested lists and objects. */
export type RecordDocument = Readonly<Record<string, unknown>>;

/** The stream event a write applies: its stream's checkpoint moves to `version` with it (see `writeRecord`). */
export interface StreamCheckpoint {
  readonly streamId: string;
  readonly version: number;
}

/** One record state to write (see `writeRecords`). */
export interface RecordWrite {
  readonly orgId: number;
  readonly record: RecordDocument;
  /** The stream event this state comes from: its stream's checkpoint moves with the write. */
  readonly checkpoint?: StreamCheckpoint | undefined;
}

/**
 * Writes a record's full state into the read model: upserts its row with its document (when the model
 * stores them), replaces its child rows, then re-renders the documents that show it (see
 * `refreshReferrers`). Idempotent by version: a state whose `version` is not newer than the stored row,
 * or than the version at which the record was deleted, changes nothing. With `checkpoint`, the same
 * statement first moves that stream's checkpoint (`advanceCheckpoint`), and nothing is written when it
 * was there already. Runs its statements on `client` and expects the caller's transaction around them
 * (the projector commits them with its batch).
 *
 * @returns whether the state was applied.
 */
export async function writeRecord(
  client: Queryable,
  model: ModelDefinition,
  orgId: number,
  record: RecordDocument,
  options: ReadModelOptions & { readonly checkpoint?: StreamCheckpoint } = {},
): Promise<boolean> {
  const [applied] = await writeRecords(
    client,
    model,
    [{ orgId, record, checkpoint: options.checkpoint }],
    options,
  );
  return applied!;
}

/**
 * `writeRecord` for several records of one model at once, each at most once (two states of the same
 * record in one statement would be refused by Postgres), and all with a checkpoint or none: their rows
 * are upserted by one statement, so that a batch of new records with no child rows (a projector's batch
 * of creates) takes one statement, not one per record. A record's document is rendered from the values
 * the upsert writes, with no child rows: right for a new record without any. Otherwise its child rows
 * are replaced after the upsert and its document rendered again from them. Then every written record's
 * referrers are rendered again, in the order given, so that a document showing another record written
 * in the same statement (rendered from its row as it was before) is made again from its new state.
 *
 * @returns whether each state was applied, in the order given.
 */
export async function writeRecords(
  client: Queryable,
  model: ModelDefinition,
  writes: readonly RecordWrite[],
  options: ReadModelOptions = {},
): Promise<boolean[]> {
  if (writes.length === 0) return [];
  const root = tableTree(model);
  const ids = writes.map(({ record }) => positiveInteger(record, 'id'));
  for (const { record } of writes) positiveInteger(record, 'version');
  if (new Set(ids).size !== ids.length) throw new Error(`writeRecords: a ${model.name} twice in one call`);
  const withCheckpoint = writes[0]!.checkpoint !== undefined;
  if (writes.some(({ checkpoint }) => (checkpoint !== undefined) !== withCheckpoint))
    throw new Error('writeRecords: all writes move a checkpoint, or none does');
  const { text, values } = upsertStatement(root, model, options, withCheckpoint);
  const { rows: upserted } = await client.query<{ id: string; inserted: boolean }>(
    prepared(text, values(writes)),
  );
  const written = new Map(upserted.map((row) => [Number(row.id), row.inserted]));
  for (const [index, { orgId, record }] of writes.entries()) {
    const id = ids[index]!;
    const inserted = written.get(id);
    if (inserted === undefined) continue;
    const rows = new Map<TableNode, unknown[][]>();
    collectChildRows(root, [id], record, rows);
    // The upsert rendered the document with no child rows: right for a row it inserted with none.
    if (root.children.length > 0 && !(inserted && rows.size === 0)) {
      // A row just inserted has no children yet. For an updated one, deleting the direct children
      // cascades to theirs (packages → packages' lines).
      for (const child of inserted ? [] : root.children) {
        await client.query(
          prepared(`DELETE FROM ${qualifiedTable(options, child.node.table)} WHERE record_id = $1`, [id]),
        );
      }
      for (const [node, nodeRows] of rows)
        await client.query(insertChildRows(node, orgId, nodeRows, options));
      if (root.storesDocument)
        await client.query(
          prepared(
            renderDocumentsStatement(root, options, (alias) => `${alias}.id = $1`),
            [id],
          ),
        );
    }
  }
  for (const [index, { orgId }] of writes.entries())
    if (written.has(ids[index]!)) await refreshReferrers(client, model, orgId, ids[index]!, options);
  return ids.map((id) => written.has(id));
}

/**
 * Removes a record from the read model (its child rows go with it) and remembers the deletion, so
 * that replaying an older event cannot bring the record back. A deletion whose `version` is not newer
 * than the stored row changes nothing.
 *
 * @returns whether a row was removed.
 */
export async function deleteRecord(
  client: Queryable,
  model: ModelDefinition,
  orgId: number,
  id: number,
  version: number,
  options: ReadModelOptions = {},
): Promise<boolean> {
  const table = qualifiedTable(options, tableTree(model).table);
  const deleted = qualifiedTable(options, DELETED_RECORDS_TABLE);
  const counts = qualifiedTable(options, RECORD_COUNTS_TABLE);
  const result = await client.query<{ removed: number }>(
    `WITH removed AS (
  DELETE FROM ${table} WHERE id = $1 AND org_id = $2 AND version < $3 RETURNING id
), remembered AS (
  INSERT INTO ${deleted} AS d (model, id, org_id, version) VALUES ($4, $1, $2, $3)
  ON CONFLICT (model, id) DO UPDATE SET version = GREATEST(d.version, EXCLUDED.version)
  WHERE d.org_id = EXCLUDED.org_id
), counted AS (
  UPDATE ${counts} SET count = count - 1 WHERE model = $4 AND org_id = $2 AND EXISTS (SELECT 1 FROM removed)
)
SELECT count(*)::int AS removed FROM removed`,
    [id, orgId, version, model.name],
  );
  const removed = (result.rows[0]?.removed ?? 0) > 0;
  if (removed) await refreshReferrers(client, model, orgId, id, options);
  return removed;
}

/**
 * Renders the documents of the organization's records of `model` among `ids`, for rows written
 * straight into the read model's tables (a bulk load) rather than through `writeRecord`.
 */
export async function renderDocuments(
  client: Queryable,
  model: ModelDefinition,
  orgId: number,
  ids: readonly number[],
  options: ReadModelOptions = {},
): Promise<void> {
  const root = tableTree(model);
  if (!root.storesDocument) return;
  await client.query(
    renderDocumentsStatement(
      root,
      options,
      (alias) => `${alias}.org_id = $1 AND ${alias}.id = ANY($2::bigint[])`,
    ),
    [orgId, ids],
  );
}

/** Where the registry's models reference a model: the table (of `referrer`) and its `<name>_id` column. */
interface ReferringColumn {
  readonly referrer: TableNode;
  readonly node: TableNode;
  readonly column: string;
}

const referringColumns = new WeakMap<ModelDefinition, readonly ReferringColumn[]>();

/** The columns of stored-document models of the registry (`MODELS`) that reference `model`. */
function referringColumnsOf(model: ModelDefinition): readonly ReferringColumn[] {
  let found = referringColumns.get(model);
  if (!found) {
    const columns: ReferringColumn[] = [];
    const visit = (referrer: TableNode, node: TableNode): void => {
      for (const { column, definition } of node.references)
        if (definition.target() === model) columns.push({ referrer, node, column });
      for (const child of node.children) visit(referrer, child.node);
    };
    for (const referrer of Object.values(MODELS).map(tableTree))
      if (referrer.storesDocument) visit(referrer, referrer);
    found = columns;
    referringColumns.set(model, found);
  }
  return found;
}

/**
 * Re-renders the documents of the organization's records that reference record `id` of `model`: their
 * documents show its display fields (a phone number type's `name` in each person's phone numbers).
 * Every write of a referenced record does it, since it cannot tell cheaply what a document shows.
 */
async function refreshReferrers(
  client: Queryable,
  model: ModelDefinition,
  orgId: number,
  id: number,
  options: ReadModelOptions,
): Promise<void> {
  for (const { referrer, node, column } of referringColumnsOf(model)) {
    const condition = (alias: string): string =>
      node === referrer
        ? `${alias}.org_id = $1 AND ${alias}.${quoteIdentifier(column)} = $2`
        : `${alias}.org_id = $1 AND ${alias}.id IN (SELECT record_id FROM ${qualifiedTable(options, node.table)}
    WHERE org_id = $1 AND ${quoteIdentifier(column)} = $2)`;
    await client.query(prepared(renderDocumentsStatement(referrer, options, condition), [orgId, id]));
  }
}

function positiveInteger(record: RecordDocument, key: string): number {
  const value = record[key];
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1)
    throw new Error(`record.${key} must be a positive integer, got ${JSON.stringify(value)}`);
  return value;
}

/** A model's upsert: its text, and the values of its parameters (an array per column) for records' states. */
interface UpsertStatement {
  readonly text: string;
  readonly values: (writes: readonly RecordWrite[]) => unknown[];
}

/** The upserts made so far, by model, then by schema and whether they move a checkpoint. */
const upserts = new WeakMap<ModelDefinition, Map<string, UpsertStatement>>();

/**
 * `INSERT ... ON CONFLICT DO UPDATE ... WHERE stored.version < new.version` of rows given as one array
 * per column, a row skipped when its record was deleted at its version or later (or, with `checkpoint`,
 * when its stream's checkpoint was there already), counting the records that are new. A row's document
 * is rendered from the values written (`t0`, a row of the table's columns), with no child rows. Returns
 * the id of each row written, and whether it was inserted.
 *
 * The text depends only on the model, the schema and whether checkpoints move, so it is made once
 * for each and kept (rendering it took 20-50 µs of a projected record's CPU, and its statement name
 * was looked up by a new string each time).
 */
function upsertStatement(
  root: TableNode,
  model: ModelDefinition,
  options: ReadModelOptions,
  withCheckpoint: boolean,
): UpsertStatement {
  const key = `${options.schema ?? READ_SCHEMA}${withCheckpoint ? ' checkpoint' : ''}`;
  let byKey = upserts.get(model);
  if (!byKey) upserts.set(model, (byKey = new Map<string, UpsertStatement>()));
  let statement = byKey.get(key);
  if (!statement) {
    statement = renderUpsert(root, model, options, withCheckpoint);
    byKey.set(key, statement);
  }
  return statement;
}

function renderUpsert(
  root: TableNode,
  model: ModelDefinition,
  options: ReadModelOptions,
  withCheckpoint: boolean,
): UpsertStatement {
  const aliases = new TableAliases();
  const row = aliases.next();
  const stored = storedValues(root);
  // $1 the model's name, then one array per column of t0: org_id, the stored values, and with
  // checkpoints the stream and its version.
  const names = ['org_id', ...stored.map(({ column }) => column)];
  const types = ['bigint', ...stored.map(({ type }) => type)];
  if (withCheckpoint) names.push(CHECKPOINT_STREAM, CHECKPOINT_VERSION);
  if (withCheckpoint) types.push('text', 'bigint');
  const arrays = types.map((type, index) => `$${index + 2}::${type}[]`);
  const t0 = `unnest(${arrays.join(', ')}) AS ${row}(${names.map(quoteIdentifier).join(', ')})`;
  const columns = names.slice(0, 1 + stored.length).map(quoteIdentifier);
  const values = columns.map((column) => `${row}.${column}`);
  if (root.storesDocument) {
    columns.push(quoteIdentifier(DOCUMENT_COLUMN));
    // As the row has no child rows yet: right for a row inserted without any, and every other row with
    // children has its document rendered again once they are written (`writeRecords`). Their subqueries
    // on the empty child tables were an eighth to a quarter of the Postgres CPU of a batch of new people,
    // and at a batch of one, which Postgres plans at every call, three fifths (docs/benchmarks.md).
    values.push(renderRow(root, row, { options, org: `${row}.org_id`, aliases, childless: true }));
  }
  const updates = columns
    .filter((column) => column !== '"id"')
    .map((column) => `${column} = EXCLUDED.${column}`);
  const counts = qualifiedTable(options, RECORD_COUNTS_TABLE);
  const stream = `${row}.${quoteIdentifier(CHECKPOINT_STREAM)}`;
  const advanced = withCheckpoint
    ? `advanced AS (
  ${checkpointAdvance(options.schema ?? READ_SCHEMA, `SELECT * FROM unnest(${arrays.slice(-2).join(', ')})`)}
  RETURNING stream_id
), `
    : '';
  const text = `WITH ${advanced}written AS (
  INSERT INTO ${qualifiedTable(options, root.table)} AS stored (${columns.join(', ')})
  SELECT ${values.join(', ')} FROM ${t0}
  WHERE NOT EXISTS (
    SELECT 1 FROM ${qualifiedTable(options, DELETED_RECORDS_TABLE)} d
    WHERE d.model = $1 AND d.id = ${row}."id" AND d.org_id = ${row}."org_id"
      AND d.version >= ${row}."version"
  )${withCheckpoint ? `\n    AND ${stream} IN (SELECT stream_id FROM advanced)` : ''}
  ON CONFLICT (id) DO UPDATE SET ${updates.join(', ')}
  WHERE stored.version < EXCLUDED.version AND stored.org_id = EXCLUDED.org_id
  -- xmax is 0 on a row this statement inserted, and set on one it updated.
  RETURNING stored.id, stored.org_id, (stored.xmax = 0) AS inserted
), counted AS (
  INSERT INTO ${counts} AS c (model, org_id, count)
  SELECT $1, org_id, count(*) FROM written WHERE inserted GROUP BY org_id
  ON CONFLICT (model, org_id) DO UPDATE SET count = c.count + EXCLUDED.count
)
SELECT id, inserted FROM written`;
  return {
    text,
    values: (writes) => [
      model.name,
      writes.map(({ orgId }) => orgId),
      ...stored.map(({ read }) => writes.map(({ record }) => read(record))),
      ...(withCheckpoint
        ? [
            writes.map(({ checkpoint }) => checkpoint!.streamId),
            writes.map(({ checkpoint }) => checkpoint!.version),
          ]
        : []),
    ],
  };
}

/** The columns of the upsert's rows (`t0`) that carry a record's stream and version: no field's name starts with `_`. */
const CHECKPOINT_STREAM = '_checkpoint_stream';
const CHECKPOINT_VERSION = '_checkpoint_version';

/** A column a row of a table stores, and how to read its value from the record's JSON. */
interface StoredValue {
  readonly column: string;
  readonly type: string;
  readonly read: (value: RecordDocument) => unknown;
}

/**
 * The stored columns and reference ids of a table's rows (keys and `org_id` aside). A decimal is cast
 * to its column's own `numeric(p, s)`, as storing it rounds it, so that a document rendered from the
 * values written shows what the row holds.
 */
function storedValues(node: TableNode): StoredValue[] {
  return [
    ...node.columns.map(({ name, definition }) => ({
      column: name,
      type: definition.type === 'decimal' ? columnSqlType(definition) : sqlType(definition.type),
      read: (value: RecordDocument) => value[name] ?? null,
    })),
    ...node.references.map(({ name, column }) => ({
      column,
      type: 'bigint',
      read: (value: RecordDocument) => referencedId(value[name]),
    })),
  ];
}

function referencedId(value: unknown): unknown {
  return typeof value === 'object' && value !== null && 'id' in value ? value.id : null;
}

/**
 * Flattens nested lists and objects into rows per child table: key columns first, then values.
 * Tables enter the map parents first, which is the order the foreign keys need them inserted in.
 */
function collectChildRows(
  node: TableNode,
  key: readonly unknown[],
  value: RecordDocument,
  rows: Map<TableNode, unknown[][]>,
): void {
  for (const child of node.children) {
    const nested = value[child.name];
    const elements =
      child.definition.kind === 'list' ? (Array.isArray(nested) ? nested : []) : nested ? [nested] : [];
    elements.forEach((element: RecordDocument, ordinal) => {
      const childKey = child.definition.kind === 'list' ? [...key, ordinal] : key;
      const tableRows = rows.get(child.node) ?? [];
      tableRows.push([...childKey, ...storedValues(child.node).map(({ read }) => read(element))]);
      rows.set(child.node, tableRows);
      collectChildRows(child.node, childKey, element, rows);
    });
  }
}

/** One multi-row insert: a parameter per column holding that column's values as an array. */
function insertChildRows(
  node: TableNode,
  orgId: number,
  rows: readonly unknown[][],
  options: ReadModelOptions,
): CompiledQuery {
  const params = new SqlParameters();
  const org = params.add(orgId);
  const stored = storedValues(node);
  const names = [...node.keyColumns, ...stored.map(({ column }) => column)];
  const types = [...node.keyColumns.map(keyColumnType), ...stored.map(({ type }) => type)];
  const arrays = types.map((type, index) => `${params.add(rows.map((row) => row[index]))}::${type}[]`);
  return {
    text: `INSERT INTO ${qualifiedTable(options, node.table)} (org_id, ${names.map(quoteIdentifier).join(', ')})
SELECT ${org}::bigint, * FROM unnest(${arrays.join(', ')})`,
    values: params.values,
  };
}
