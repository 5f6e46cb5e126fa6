import type { RecordChange } from '@ofp/contracts';
import type { StoredEvent } from '@ofp/event-store';
import {
  MODELS,
  advanceCheckpoint,
  deleteRecord,
  writeRecords,
  type ModelDefinition,
  type RecordWrite,
} from '@ofp/models';
import type { PoolClient } from '@ofp/runtime';

const modelsByStreamType = new Map<string, ModelDefinition>(Object.values(MODELS).map((m) => [m.name, m]));

/** The stream types the projection consumes: one per model. */
export const PROJECTED_STREAM_TYPES: readonly string[] = [...modelsByStreamType.keys()];

/** The streams of `events` the projection applies, each with the last version among them. */
export function projectedStreams(events: readonly StoredEvent[]): Map<string, number> {
  const streams = new Map<string, number>();
  for (const event of events)
    if (modelsByStreamType.has(event.streamType) && event.orgId !== null)
      streams.set(event.streamId, Math.max(event.version, streams.get(event.streamId) ?? 0));
  return streams;
}

/**
 * Applies a batch of record events to the read schema inside the caller's transaction. Each event
 * advances its stream's checkpoint, in the statement that writes its record; an event at or below the
 * checkpoint is skipped, which makes redelivery and replay harmless. Consecutive writes of one model,
 * each of a different record, go in one statement (`writeRecords`); a deletion, another model's event
 * or a second event of a record in the run writes the run first, so that events apply in their order.
 */
export async function applyEvents(
  client: PoolClient,
  schema: string,
  events: readonly StoredEvent[],
): Promise<void> {
  let run: { model: ModelDefinition; writes: RecordWrite[]; ids: Set<unknown> } | undefined;
  const flush = async (): Promise<void> => {
    if (run) await writeRecords(client, run.model, run.writes, { schema });
    run = undefined;
  };
  for (const event of events) {
    const model = modelsByStreamType.get(event.streamType);
    if (!model || event.orgId === null) continue;
    const change = event.data as RecordChange;
    const checkpoint = { streamId: event.streamId, version: event.version };
    if (run && (run.model !== model || change.deleted || run.ids.has(change.record.id))) await flush();
    if (!change.deleted) {
      run ??= { model, writes: [], ids: new Set() };
      run.writes.push({ orgId: event.orgId, record: change.record, checkpoint });
      run.ids.add(change.record.id);
    } else if (await advanceCheckpoint(client, schema, event.streamId, event.version)) {
      await deleteRecord(client, model, event.orgId, change.record.id, change.record.version, { schema });
    }
  }
  await flush();
}
