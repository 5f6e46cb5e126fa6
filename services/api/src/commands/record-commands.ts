import { setTimeout } from 'node:timers/promises';
import { baseError, fieldError, recordStreamId, type RecordJson } from '@ofp/contracts';
import type { GlobalPosition } from '@ofp/event-store';
import type { ColumnDefinition, ModelDefinition, RecordBody } from '@ofp/models';
import type { IdempotencyStore, PoolClient, StoredResponse } from '@ofp/runtime';
import { rulesOf } from '../domain/rules-by-model.js';
import {
  ABSENT,
  decide,
  type Actor,
  type RecordCommand,
  type RecordEvent,
  type RecordState,
  type RelatedState,
} from './record-decider.js';
import {
  WrongExpectedVersion,
  type EventMetadata,
  type RecordStore,
  type RecordStreamChange,
} from './record-store.js';
import type { ReferenceResolver } from './references.js';
import type { UniqueValue, UniqueValues } from './unique-values.js';

/**
 * How often a command is decided again after losing a race to a concurrent writer (without
 * If-Match). Shipments of one fulfillment order all append to its stream, so a burst of them
 * queues there: each round one wins, and the others decide again on its result.
 */
const MAX_ATTEMPTS = 40;

export interface WriteContext extends EventMetadata {
  readonly orgId: number;
  readonly by: Actor;
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
  readonly written?: StreamVersion & {
    readonly position: GlobalPosition;
    /** Other records the write changed with it (a shipment's fulfillment order): wait for them too. */
    readonly also: readonly StreamVersion[];
  };
}

export interface StreamVersion {
  readonly streamId: string;
  readonly version: number;
}

/**
 * Runs a write: resolves references, loads the record (and the record its model's rules decide on
 * with it, such as a shipment's fulfillment order), decides, and appends both records' events with
 * the unique-value reservations and the idempotency record in one transaction. A lost race is
 * decided again on the new state, unless the client pinned its record's version with If-Match
 * (then it is a 412).
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
      const state = await this.loadOwn(model, id, context.orgId, request.kind === 'create');
      const related = await this.loadRelated(
        model,
        context.orgId,
        request.kind === 'create' ? body : state.status === 'live' ? state.record : undefined,
      );
      const decision = decide(model, this.command(request, id, body, context.by), state, related);
      const { events } = decision;
      if (events.length === 0) {
        if (state.status !== 'live') throw new Error('a decision without events needs a live record');
        return { record: state.record, created: false };
      }
      const last = events[events.length - 1]!;
      const streamId = recordStreamId(model.name, id);
      try {
        let outcome: WriteOutcome | undefined;
        const changes: RecordStreamChange[] = [{ model, orgId: context.orgId, id, state, events }];
        if (decision.related) changes.push({ ...decision.related, orgId: context.orgId });
        await this.records.append(changes, context, async (client, [result, ...others]) => {
          await this.reserveUniqueValues(client, model, context.orgId, id, request.kind === 'create', events);
          outcome = {
            record: last.data.record,
            created: request.kind === 'create',
            written: {
              streamId,
              version: result!.version,
              position: result!.position,
              also: changes.slice(1).map((change, i) => ({
                streamId: recordStreamId(change.model.name, change.id),
                version: others[i]!.version,
              })),
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
        });
        if (!outcome) throw new Error(`append to ${streamId} produced no outcome`);
        return outcome;
      } catch (error) {
        if (!(error instanceof WrongExpectedVersion)) throw error;
        // If-Match pins the client's record; a race on the related record is not the client's to lose.
        if (error.streamId === streamId && request.kind !== 'create' && request.ifMatch !== undefined) {
          throw baseError(
            'PreconditionFailed',
            'The record was changed concurrently; If-Match no longer matches',
          );
        }
        if (error.streamId === streamId && request.kind === 'create' && request.id !== undefined)
          throw fieldError('Conflict', 'id', 'has already been taken');
        if (attempt >= MAX_ATTEMPTS) throw error;
        // Jitter spreads the losers of one round apart, so that the next round is not a crowd again.
        await setTimeout(Math.random() * 5 * Math.min(attempt, 10));
      }
    }
  }

  /**
   * The record's state as this organization sees it: another organization's record behaves exactly
   * like one that does not exist (API.md §1), except that its id stays taken.
   */
  private async loadOwn(
    model: ModelDefinition,
    id: number,
    orgId: number,
    creating: boolean,
  ): Promise<RecordState> {
    const loaded = await this.records.load(model, id);
    return loaded.orgId === undefined || loaded.orgId === orgId || creating ? loaded.state : ABSENT;
  }

  /** The record the model's rules decide on with this one, named by the request's or the record's fields. */
  private async loadRelated(
    model: ModelDefinition,
    orgId: number,
    fields: Readonly<Record<string, unknown>> | undefined,
  ): Promise<RelatedState | undefined> {
    const relation = rulesOf(model).related;
    const id = relation && fields ? relation.idOf(fields) : undefined;
    if (!relation || id === undefined) return undefined;
    const target = relation.model();
    return { model: target, id, state: await this.loadOwn(target, id, orgId, false) };
  }

  private command(request: WriteRequest, id: number, body: RecordBody, by: Actor): RecordCommand {
    const at = this.clock().toISOString();
    const ifMatch =
      request.kind !== 'create' && request.ifMatch !== undefined ? { ifMatch: request.ifMatch } : {};
    switch (request.kind) {
      case 'create':
        return { kind: 'create', id, fields: body, at, by };
      case 'update':
        return { kind: 'update', fields: body, at, by, ...ifMatch };
      case 'delete':
        return { kind: 'delete', at, by, ...ifMatch };
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
