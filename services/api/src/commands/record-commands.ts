import type { RecordJson } from '@ofp/contracts';
import { baseError, fieldError } from '@ofp/contracts';
import type { GlobalPosition } from '@ofp/event-store';
import type { ColumnDefinition, ModelDefinition, RecordBody } from '@ofp/models';
import type { PoolClient } from '@ofp/runtime';
import type { IdempotencyStore, StoredResponse } from './idempotency.js';
import { decide, type RecordCommand, type RecordEvent, type RecordState } from './record-decider.js';
import { WrongExpectedVersion, type EventMetadata, type RecordStore } from './record-store.js';
import type { ReferenceResolver } from './references.js';
import type { UniqueValue, UniqueValues } from './unique-values.js';

/** How often a command is decided again after losing a race to a concurrent writer (without If-Match). */
const MAX_ATTEMPTS = 5;

export interface WriteContext extends EventMetadata {
  readonly orgId: number;
}

/** An Idempotency-Key's request, and how to build the response to store with the change. */
export interface IdempotentWrite {
  readonly key: string;
  readonly hash: string;
  readonly respond: (outcome: WriteOutcome) => StoredResponse;
}

export type WriteRequest =
  | { readonly kind: 'create'; readonly id?: number; readonly body: RecordBody }
  | { readonly kind: 'update'; readonly id: number; readonly body: RecordBody; readonly ifMatch?: number }
  | { readonly kind: 'delete'; readonly id: number; readonly ifMatch?: number };

export interface WriteOutcome {
  readonly record: RecordJson;
  readonly created: boolean;
  /** The stream and version to wait for (read-your-writes); absent when nothing changed. */
  readonly written?: {
    readonly streamId: string;
    readonly version: number;
    readonly position: GlobalPosition;
  };
}

/**
 * Runs a write: resolves references, loads the record, decides, and appends with the unique-value
 * reservations and the idempotency record in the same transaction. A lost race is decided again on
 * the new state, unless the client pinned a version with If-Match (then it is a 412).
 */
export class RecordCommands {
  constructor(
    private readonly records: RecordStore,
    private readonly references: ReferenceResolver,
    private readonly unique: UniqueValues,
    private readonly idempotency: IdempotencyStore,
    private readonly clock: () => Date,
  ) {}

  async write(
    model: ModelDefinition,
    context: WriteContext,
    request: WriteRequest,
    idempotent?: IdempotentWrite,
  ): Promise<WriteOutcome> {
    const body =
      request.kind === 'delete' ? {} : await this.references.resolve(model, context.orgId, request.body);
    for (let attempt = 1; ; attempt++) {
      const id = request.kind === 'create' ? (request.id ?? (await this.records.nextId())) : request.id;
      const loaded = await this.records.load(model, id);
      // Another organization's record behaves exactly like one that does not exist (API.md §1),
      // except that its id stays taken.
      const state: RecordState =
        loaded.orgId === undefined || loaded.orgId === context.orgId || request.kind === 'create'
          ? loaded.state
          : { status: 'absent' };
      const command = this.command(request, id, body);
      const events = decide(model, command, state);
      if (events.length === 0) {
        if (state.status !== 'live') throw new Error('a decision without events needs a live record');
        return { record: state.record, created: false };
      }
      const last = events[events.length - 1]!;
      try {
        let outcome: WriteOutcome | undefined;
        const appended = await this.records.append(
          model,
          context.orgId,
          id,
          state,
          events,
          context,
          async (client, result) => {
            await this.reserveUniqueValues(
              client,
              model,
              context.orgId,
              id,
              request.kind === 'create',
              events,
            );
            outcome = {
              record: last.data.record,
              created: request.kind === 'create',
              written: {
                streamId: `${model.name}-${id}`,
                version: result.version,
                position: result.position,
              },
            };
            if (
              idempotent &&
              !(await this.idempotency.record(
                client,
                context.orgId,
                idempotent.key,
                idempotent.hash,
                idempotent.respond(outcome),
              ))
            ) {
              throw baseError('Conflict', 'A request with the same Idempotency-Key is being processed');
            }
          },
        );
        if (!outcome) throw new Error(`append of ${appended.version} produced no outcome`);
        return outcome;
      } catch (error) {
        if (!(error instanceof WrongExpectedVersion)) throw error;
        if (request.kind !== 'create' && request.ifMatch !== undefined) {
          throw baseError(
            'PreconditionFailed',
            'The record was changed concurrently; If-Match no longer matches',
          );
        }
        if (request.kind === 'create' && request.id !== undefined)
          throw fieldError('Conflict', 'id', 'has already been taken');
        if (attempt >= MAX_ATTEMPTS) throw error;
      }
    }
  }

  private command(request: WriteRequest, id: number, body: RecordBody): RecordCommand {
    const at = this.clock().toISOString();
    switch (request.kind) {
      case 'create':
        return { kind: 'create', id, fields: body, at };
      case 'update':
        return {
          kind: 'update',
          fields: body,
          at,
          ...(request.ifMatch === undefined ? {} : { ifMatch: request.ifMatch }),
        };
      case 'delete':
        return { kind: 'delete', at, ...(request.ifMatch === undefined ? {} : { ifMatch: request.ifMatch }) };
      default: {
        const unhandled: never = request;
        throw new Error(`unhandled request ${JSON.stringify(unhandled)}`);
      }
    }
  }

  /** Moves the record's unique-value reservations to what the events set (or releases them on delete). */
  private async reserveUniqueValues(
    client: PoolClient,
    model: ModelDefinition,
    orgId: number,
    id: number,
    created: boolean,
    events: readonly RecordEvent[],
  ): Promise<void> {
    const last = events[events.length - 1]!.data;
    if (last.deleted) {
      await this.unique.release(client, model.name, id);
      return;
    }
    const uniqueFields = Object.entries(model.fields)
      .filter((entry): entry is [string, ColumnDefinition] => entry[1].kind === 'column' && entry[1].unique)
      .map(([name]) => name);
    const touched = created
      ? uniqueFields
      : uniqueFields.filter((name) => events.some((e) => name in e.data.previous));
    if (touched.length === 0) return;
    const values: UniqueValue[] = touched
      .map((field) => ({ field, value: last.record[field] }))
      .filter((v): v is UniqueValue => typeof v.value === 'string' && v.value !== '');
    await this.unique.reserve(client, orgId, model.name, id, touched, values);
  }
}
