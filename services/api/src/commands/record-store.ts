import { randomUUID } from 'node:crypto';
import { recordStreamId, type RecordChange } from '@ofp/contracts';
import { WrongExpectedVersion, type AppendResult, type EventStore } from '@ofp/event-store';
import type { ModelDefinition } from '@ofp/models';
import { inTransaction, type Pool, type PoolClient } from '@ofp/runtime';
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
   * Appends each record's events at its state's version, all in one transaction; `alsoInTransaction`
   * adds writes that must commit with them. Throws WrongExpectedVersion when a concurrent writer
   * changed one of the records first. Results come in the order of `changes`. With no events at
   * all, `alsoInTransaction` runs in a transaction of its own.
   */
  async append(
    changes: readonly RecordStreamChange[],
    metadata: EventMetadata,
    alsoInTransaction: (client: PoolClient, results: readonly AppendResult[]) => Promise<void>,
  ): Promise<AppendResult[]> {
    // A process manager's event that changes nothing is still marked handled.
    if (changes.every((change) => change.events.length === 0)) {
      await inTransaction(this.pool, (client) => alsoInTransaction(client, []));
      return [];
    }
    return await this.store.appendToStreams(
      changes.map((change) => ({
        streamId: recordStreamId(change.model.name, change.id),
        streamType: change.model.name,
        expectedVersion: versionOf(change.state),
        orgId: change.orgId,
        events: change.events.map((event) => ({
          eventId: randomUUID(),
          type: event.type,
          data: event.data,
          metadata: { actor: metadata.actor, request_id: metadata.requestId },
        })),
      })),
      alsoInTransaction,
    );
  }
}

/** Events decided on one record's state, to append at its version. */
export interface RecordStreamChange {
  readonly model: ModelDefinition;
  readonly orgId: number;
  readonly id: number;
  readonly state: RecordState;
  readonly events: readonly RecordEvent[];
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
