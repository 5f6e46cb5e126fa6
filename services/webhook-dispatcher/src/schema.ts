import { readModelDdl, webhookDeliveries, webhooks, type ReadModelOptions } from '@ofp/models';
import type { PoolClient } from '@ofp/runtime';

/** The dispatcher's Postgres schema (ARCHITECTURE.md: subscriptions, deliveries, attempts). */
export const SCHEMA = 'webhooks';

/** Where the registry-derived tables live, for the `@ofp/models` reads and writes. */
export const TABLES: ReadModelOptions = { schema: SCHEMA };

/** Serializes start-ups racing on the idempotent layout script. */
const LAYOUT_LOCK = "hashtext('ofp:webhooks-layout')";

/**
 * Lays out the registry's `webhooks` and `webhook_deliveries` tables in {@link SCHEMA} (idempotent: run
 * at every start, so a field added to the registry appears as a column, as the projector does it).
 *
 * `webhook_deliveries` is also the delivery queue, written several times per delivery: it keeps the
 * registry's columns (so `q` compiles against it) but not the read model's index per column, which
 * would make each queue write touch some twenty indexes. The migrations give it the indexes of the
 * queue's own access paths and of the likely filters instead.
 */
export async function layOutTables(client: PoolClient): Promise<void> {
  await client.query(`SELECT pg_advisory_xact_lock(${LAYOUT_LOCK})`);
  await client.query(readModelDdl([webhooks], TABLES));
  const deliveries = readModelDdl([webhookDeliveries], TABLES)
    .split(';\n')
    .filter((statement) => statement.trim() !== '' && !statement.startsWith('CREATE INDEX'));
  await client.query(`${deliveries.join(';\n')};`);
}
