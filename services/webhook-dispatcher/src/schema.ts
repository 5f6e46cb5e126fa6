import { readModelDdl, type ReadModelOptions } from '@ofp/models';
import { webhookDeliveries, webhooks } from './models.js';
import type { PoolClient } from '@ofp/runtime';

/** The dispatcher's Postgres schema (ARCHITECTURE.md: subscriptions, deliveries, attempts). */
export const SCHEMA = 'webhooks';

/** Where the registry-derived tables live, for the `@ofp/models` reads and writes. */
export const TABLES: ReadModelOptions = { schema: SCHEMA };

/** Serializes start-ups racing on the idempotent layout script. */
const LAYOUT_LOCK = "hashtext('ofp:webhooks-layout')";

/**
 * Lays out the `webhooks` and `webhook_deliveries` tables in {@link SCHEMA} from their declarations
 * (idempotent: run at every start, so a field added to a declaration appears as a column, as the
 * projector does it). `webhook_deliveries` is also the delivery queue, declared without the read
 * model's index per column; the migrations give it the indexes of the queue's access paths.
 */
export async function layOutTables(client: PoolClient): Promise<void> {
  await client.query(`SELECT pg_advisory_xact_lock(${LAYOUT_LOCK})`);
  await client.query(readModelDdl([webhooks, webhookDeliveries], TABLES));
}
