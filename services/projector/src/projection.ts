import type { RecordChange } from '@ofp/contracts';
import type { StoredEvent } from '@ofp/event-store';
import { MODELS, advanceCheckpoint, deleteRecord, writeRecord, type ModelDefinition } from '@ofp/models';
import type { PoolClient } from '@ofp/runtime';

const modelsByStreamType = new Map<string, ModelDefinition>(Object.values(MODELS).map((m) => [m.name, m]));

/** The stream types the projection consumes: one per model. */
export const PROJECTED_STREAM_TYPES: readonly string[] = [...modelsByStreamType.keys()];

/**
 * Applies a batch of record events to the read schema inside the caller's transaction. Each event
 * first advances its stream's checkpoint; an event at or below the checkpoint is skipped, which
 * makes redelivery and replay harmless.
 */
export async function applyEvents(
  client: PoolClient,
  schema: string,
  events: readonly StoredEvent[],
): Promise<number> {
  let applied = 0;
  for (const event of events) {
    const model = modelsByStreamType.get(event.streamType);
    if (!model || event.orgId === null) continue;
    if (!(await advanceCheckpoint(client, schema, event.streamId, event.version))) continue;
    const change = event.data as RecordChange;
    if (change.deleted) {
      await deleteRecord(client, model, event.orgId, change.record.id, change.record.version, { schema });
    } else {
      await writeRecord(client, model, event.orgId, change.record, { schema });
    }
    applied++;
  }
  return applied;
}
