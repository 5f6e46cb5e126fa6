import { prepared } from '@ofp/runtime';
import { readModelDdl } from './ddl.js';
import type { ModelDefinition } from './fields.js';
import { READ_SCHEMA, quoteIdentifier, type Queryable } from './sql.js';

/**
 * The read model's contract between the projector, which writes it, and the services that read it
 * (the api's searches and its read-your-writes wait):
 *
 * - {@link READ_SCHEMA}: the schema searches read; a rebuild fills another schema and renames it;
 * - the checkpoint, `<schema>.stream_versions`: the last version of each stream applied, written in
 *   the transaction of the change it records, so applying an event twice or late changes nothing;
 * - {@link PROJECTION_CHANNEL}: the NOTIFY raised after each batch that changed something;
 * - {@link PROJECTION_LOCK}: held shared by each live batch and exclusively by a rebuild's swap.
 */
export { READ_SCHEMA };

/** NOTIFY channel raised after each batch the projector applied (and after a rebuild's swap). */
export const PROJECTION_CHANNEL = 'read_progress';

/** Advisory lock between live batches (shared) and a rebuild's swap (exclusive): no swap mid-batch. */
export const PROJECTION_LOCK = "hashtext('ofp:projection')";

const CHECKPOINT_TABLE = 'stream_versions';

/** Creates a read schema: the checkpoint and every given model's tables. Idempotent. */
export async function createReadSchema(
  db: Queryable,
  schema: string,
  models: readonly ModelDefinition[],
): Promise<void> {
  await db.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdentifier(schema)}`);
  await db.query(
    `CREATE TABLE IF NOT EXISTS ${checkpointTable(schema)} (stream_id text PRIMARY KEY, version integer NOT NULL)`,
  );
  await db.query(readModelDdl(models, { schema }));
}

/**
 * Moves a stream's checkpoint to `version`, in the transaction that applies it. False when that
 * version (or a later one) was applied already: the event is then skipped. (`writeRecord` moves it in
 * the statement that writes the record.)
 */
export async function advanceCheckpoint(
  db: Queryable,
  schema: string,
  streamId: string,
  version: number,
): Promise<boolean> {
  const advanced = await db.query(
    prepared(checkpointAdvance(schema, 'VALUES ($1, $2)'), [streamId, version]),
  );
  return advanced.rowCount === 1;
}

/**
 * The statement moving each stream's checkpoint in `schema` to its version, if it is behind: `rows` is
 * the SQL of the (stream id, version) rows (`VALUES ($1, $2)`, or a select).
 */
export function checkpointAdvance(schema: string, rows: string): string {
  const table = checkpointTable(schema);
  return `INSERT INTO ${table} (stream_id, version) ${rows}
  ON CONFLICT (stream_id) DO UPDATE SET version = EXCLUDED.version WHERE ${table}.version < EXCLUDED.version`;
}

/** How far the read model has applied each of these streams ("projected up to"); absent: not at all. */
export async function projectedVersions(
  db: Queryable,
  streamIds: readonly string[],
): Promise<Map<string, number>> {
  const { rows } = await db.query<{ stream_id: string; version: number }>(
    prepared(
      `SELECT stream_id, version FROM ${checkpointTable(READ_SCHEMA)} WHERE stream_id = ANY($1::text[])`,
      [streamIds],
    ),
  );
  return new Map(rows.map((row) => [row.stream_id, row.version]));
}

function checkpointTable(schema: string): string {
  return `${quoteIdentifier(schema)}.${quoteIdentifier(CHECKPOINT_TABLE)}`;
}
