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
 * - {@link PROJECTION_CHANNEL}: the NOTIFY raised after each batch, naming the streams it applied and
 *   their versions ({@link progressNotification});
 * - {@link PROJECTION_LOCK}: held shared by each live batch and exclusively by a rebuild's swap.
 */
export { READ_SCHEMA };

/** NOTIFY channel raised after each batch the projector applied (and after a rebuild's swap). */
export const PROJECTION_CHANNEL = 'read_progress';

/** The longest payload a progress notification names its streams in (Postgres refuses 8,000 bytes). */
const PROGRESS_PAYLOAD_BYTES = 7_900;

/**
 * The statement raising {@link PROJECTION_CHANNEL} in a batch's transaction: its payload is the JSON
 * object of the streams the batch applied and the version each reached (each stream's checkpoint is at
 * least there once it commits), so that a waiter for them needs no look at the checkpoints; empty (look
 * at them) when that would not fit in a notification. The payload travels base64 in the text, which no
 * quoting setting can change.
 */
export function progressNotification(streams: ReadonlyMap<string, number>): string {
  const json = JSON.stringify(Object.fromEntries(streams));
  const payload = Buffer.from(json, 'utf8');
  return payload.length > PROGRESS_PAYLOAD_BYTES
    ? `SELECT pg_notify('${PROJECTION_CHANNEL}', '')`
    : `SELECT pg_notify('${PROJECTION_CHANNEL}', convert_from(decode('${payload.toString('base64')}', 'base64'), 'UTF8'))`;
}

/**
 * The streams and versions a {@link PROJECTION_CHANNEL} notification names; undefined when it names
 * none (a rebuild's swap, a batch too large to name its streams): then any stream may have moved.
 */
export function notifiedProgress(payload: string): Map<string, number> | undefined {
  if (payload === '') return undefined;
  try {
    const parsed: unknown = JSON.parse(payload);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
    const streams = new Map<string, number>();
    for (const [streamId, version] of Object.entries(parsed)) {
      if (typeof version !== 'number') return undefined;
      streams.set(streamId, version);
    }
    return streams;
  } catch {
    return undefined;
  }
}

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
