import { randomUUID } from 'node:crypto';
import { recordStreamId, type RecordChange } from '@ofp/contracts';
import type { AppendInput, EventStore } from '@ofp/event-store';
import type { ModelDefinition } from '@ofp/models';
import { prepared, type Pool } from '@ofp/runtime';
import { ABSENT, evolve, type RecordEvent, type RecordState } from '../domain/record-decider.js';

/** Ids taken from the sequence per statement (see `RecordStore.nextId`). */
const ID_BLOCK = 32;

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

  /** Ids taken from the sequence and not handed out yet, in the sequence's order. */
  private ids: number[] = [];
  private taken = 0;
  /** The statement taking the next block, shared by the callers that wait for it. */
  private taking: Promise<void> | undefined;

  /**
   * A new server-assigned id (API.md §1: unique per model across all organizations). Ids are taken
   * from the sequence {@link ID_BLOCK} at a time, one statement per block instead of one per create:
   * the ids a process holds when it stops are never used (a sequence has gaps anyway: a rolled-back
   * create leaves one), and two processes' creates interleave by blocks.
   */
  async nextId(): Promise<number> {
    for (;;) {
      if (this.taken < this.ids.length) return this.ids[this.taken++]!;
      this.taking ??= this.takeIds().finally(() => (this.taking = undefined));
      await this.taking;
    }
  }

  private async takeIds(): Promise<void> {
    const { rows } = await this.pool.query<{ id: number }>(
      prepared("SELECT nextval('api.record_ids') AS id FROM generate_series(1, $1)", [ID_BLOCK]),
    );
    this.ids = rows.map((row) => row.id);
    this.taken = 0;
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
