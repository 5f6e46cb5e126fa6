import { randomUUID } from 'node:crypto';
import { recordStreamId, type RecordChange } from '@ofp/contracts';
import { WrongExpectedVersion, type AppendResult, type EventStore } from '@ofp/event-store';
import type { ModelDefinition } from '@ofp/models';
import type { Pool, PoolClient } from '@ofp/runtime';
import { ABSENT, evolve, type RecordEvent, type RecordState } from './record-decider.js';

/** A record's state and the organization it belongs to (undefined for a record that never existed). */
export interface LoadedRecord {
  readonly state: RecordState;
  readonly orgId: number | undefined;
}

export interface EventMetadata {
  /** The client id of the token that made the change. */
  readonly actor: string;
  readonly requestId: string;
}

/** Loads records from their streams and appends their decided events. */
export class RecordStore {
  constructor(
    private readonly pool: Pool,
    private readonly store: EventStore,
  ) {}

  /** A new server-assigned id (API.md §1: unique per model across all organizations). */
  async nextId(): Promise<number> {
    const { rows } = await this.pool.query<{ id: number }>("SELECT nextval('api.record_ids') AS id");
    return rows[0]!.id;
  }

  async load(model: ModelDefinition, id: number): Promise<LoadedRecord> {
    const head = await this.store.readStreamHead(recordStreamId(model.name, id));
    if (!head) return { state: ABSENT, orgId: undefined };
    return { state: evolve(ABSENT, head.data as RecordChange), orgId: head.orgId ?? undefined };
  }

  /**
   * Appends events at the state's version; `alsoInTransaction` adds writes that must commit with
   * them. Throws WrongExpectedVersion when a concurrent writer changed the record first.
   */
  append(
    model: ModelDefinition,
    orgId: number,
    id: number,
    state: RecordState,
    events: readonly RecordEvent[],
    metadata: EventMetadata,
    alsoInTransaction: (client: PoolClient, result: AppendResult) => Promise<void>,
  ): Promise<AppendResult> {
    return this.store.append(
      {
        streamId: recordStreamId(model.name, id),
        streamType: model.name,
        expectedVersion: versionOf(state),
        orgId,
        events: events.map((event) => ({
          eventId: randomUUID(),
          type: event.type,
          data: event.data,
          metadata: { actor: metadata.actor, request_id: metadata.requestId },
        })),
      },
      alsoInTransaction,
    );
  }
}

export function versionOf(state: RecordState): number {
  switch (state.status) {
    case 'absent':
      return 0;
    case 'live':
      return state.record.version;
    case 'deleted':
      return state.version;
    default: {
      const unhandled: never = state;
      throw new Error(`unhandled state ${JSON.stringify(unhandled)}`);
    }
  }
}

export { WrongExpectedVersion };
