import type { RecordChange } from '@ofp/contracts';
import type { StoredEvent } from '@ofp/event-store';
import { MODELS, advanceCheckpoint, deleteRecord, writeRecord, type ModelDefinition } from '@ofp/models';
import type { PoolClient } from '@ofp/runtime';

const modelsByStreamType = new Map<string, ModelDefinition>(Object.values(MODELS).map((m) => [m.name, m]));

/** The stream types the projection consumes: one per model. */
export const PROJECTED_STREAM_TYPES: readonly string[] = [...modelsByStreamType.keys()];

/**
 * Applies a batch of record events to the read schema inside the caller's transaction. Each event
 * advances its stream's checkpoint, in the statement that writes its record; an event at or below the
 * checkpoint is skipped, which makes redelivery and replay harmless.
 */
export async function applyEvents(
  client: PoolClient,
  schema: string,
  events: readonly StoredEvent[],
): Promise<void> {
  for (const event of events) {
    const model = modelsByStreamType.get(event.streamType);
    if (!model || event.orgId === null) continue;
    const change = event.data as RecordChange;
    const checkpoint = { streamId: event.streamId, version: event.version };
    if (!change.deleted) {
      await writeRecord(client, model, event.orgId, change.record, { schema, checkpoint });
    } else if (await advanceCheckpoint(client, schema, event.streamId, event.version)) {
      await deleteRecord(client, model, event.orgId, change.record.id, change.record.version, { schema });
    }
  }
}
