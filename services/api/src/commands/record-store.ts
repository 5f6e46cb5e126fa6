import { randomUUID } from 'node:crypto';
import { recordStreamId, type RecordChange } from '@ofp/contracts';
import type { AppendInput, EventStore } from '@ofp/event-store';
import type { ModelDefinition } from '@ofp/models';
import type { Pool } from '@ofp/runtime';
import { ABSENT, evolve, type RecordEvent, type RecordState } from '../domain/record-decider.js';

export interface EventMetadata {
  /** The client id of the token that made the change, or `system`. */
  readonly actor: string;
  readonly requestId: string;
  /** The W3C trace context the change was made in, carried to its events' consumers and webhooks. */
  readonly traceparent?: string | undefined;
}

/** Events decided on one record's state, to append at its version. */
export interface RecordStreamChange {
  readonly model: ModelDefinition;
  readonly orgId: number;
  readonly id: number;
  readonly state: RecordState;
  readonly events: readonly RecordEvent[];
}

/** The records of the event store: ids, states folded from their streams, and their appends. */
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

  /**
   * A record's state as organization `orgId` sees it: another organization's record behaves exactly
   * like one that does not exist (API.md §1). `asCreator`: the state whatever the organization, for a
   * create, which must find any organization's record (a deleted one's id too) taken.
   */
  async load(model: ModelDefinition, id: number, orgId: number, asCreator = false): Promise<RecordState> {
    const head = await this.store.readStreamHead(recordStreamId(model.name, id));
    if (!head) return ABSENT;
    if (!asCreator && head.orgId !== orgId) return ABSENT;
    return evolve(ABSENT, head.data as RecordChange);
  }

  /** The append of a change: its events at the version of the state it was decided on. */
  appendOf(change: RecordStreamChange, metadata: EventMetadata): AppendInput {
    return {
      streamId: recordStreamId(change.model.name, change.id),
      streamType: change.model.name,
      expectedVersion: versionOf(change.state),
      orgId: change.orgId,
      events: change.events.map((event) => ({
        eventId: randomUUID(),
        type: event.type,
        data: event.data,
        metadata: {
          actor: metadata.actor,
          request_id: metadata.requestId,
          ...(metadata.traceparent === undefined ? {} : { traceparent: metadata.traceparent }),
        },
      })),
    };
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
