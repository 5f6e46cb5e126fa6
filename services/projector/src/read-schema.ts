import type { PoolClient } from '@ofp/runtime';
import { MODELS, readModelDdl } from '@ofp/models';

/** The schema searches read from. A rebuild fills another one and swaps it in under this name. */
export const READ_SCHEMA = 'read';

/**
 * Creates a read schema: every model's tables (derived from the registry) and the projection's
 * checkpoint, `stream_versions`: the last version of each stream applied, written in the same
 * transaction as the change it records, so that applying an event twice or late changes nothing.
 */
export async function createReadSchema(client: PoolClient, schema: string): Promise<void> {
  await client.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
  await client.query(
    `CREATE TABLE IF NOT EXISTS ${schema}.stream_versions (stream_id text PRIMARY KEY, version integer NOT NULL)`,
  );
  await client.query(readModelDdl(Object.values(MODELS), { schema }));
}
