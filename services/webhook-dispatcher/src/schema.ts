import { readModelDdl, type ReadModelOptions } from '@ofp/models';
import { webhookDeliveries, webhooks } from './models.js';
import { sealedContext, type PoolClient, type SealedColumn } from '@ofp/runtime';

/** The dispatcher's Postgres schema (ARCHITECTURE.md: subscriptions, deliveries, attempts). */
export const SCHEMA = 'webhooks';

/** Where the registry-derived tables live, for the `@ofp/models` reads and writes. */
export const TABLES: ReadModelOptions = { schema: SCHEMA };

/**
 * Where the endpoints' signing secrets are kept, sealed (API.md §12). Written out: the name is part of
 * every stored secret's sealing context, so it must not follow a rename of {@link SCHEMA}.
 */
const ENDPOINT_SECRETS_TABLE = 'webhooks.endpoints';

/**
 * The sealed columns of the endpoints: a secret is sealed for its endpoint's row, not its column, so
 * that rotation moves it from `secret` to `previous_secret` as it is.
 */
export const ENDPOINT_SECRETS_SEALED: readonly SealedColumn[] = ['secret', 'previous_secret'].map(
  (column) => ({
    table: ENDPOINT_SECRETS_TABLE,
    key: ['webhook_id'],
    column,
  }),
);

/** The context an endpoint's secret is sealed for. */
export function endpointSecretContext(webhookId: number | string): string {
  return sealedContext(ENDPOINT_SECRETS_TABLE, [webhookId]);
}

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
