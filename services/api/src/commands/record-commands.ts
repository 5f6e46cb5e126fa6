import { fieldError, baseError, recordStreamId, type RecordChange, type RecordJson } from '@ofp/contracts';
import {
  handleCommand,
  WrongExpectedVersion,
  type AppendResults,
  type Decided,
  type EventStore,
} from '@ofp/event-store';
import type { ColumnDefinition, ModelDefinition, RecordBody } from '@ofp/models';
import { describeActiveSpan, inTracesOf, type PoolClient } from '@ofp/runtime';
import {
  decide,
  type Actor,
  type RecordCommand,
  ABSENT,
  type RecordEvent,
  type RecordState,
  type RelatedState,
} from '../domain/record-decider.js';
import { rulesOf } from '../domain/rules-by-model.js';
import type { EventMetadata, RecordStore, RecordStreamChange } from './record-store.js';
import type { WrittenStream } from '../queries/read-your-writes.js';
import type { ReferenceResolver } from './references.js';
import { StockLimits } from './stock-limits.js';
import type { UniqueValue, UniqueValues } from './unique-values.js';

export interface WriteContext extends EventMetadata {
  readonly orgId: number;
  readonly by: Actor;
}

/** What a write's caller commits with it, given its outcome: the response to its Idempotency-Key. */
export type Alongside = (client: PoolClient, outcome: WriteOutcome) => Promise<void>;

export type WriteRequest =
  | { readonly kind: 'create'; readonly id?: number; readonly body: RecordBody }
  | {
      readonly kind: 'update';
      readonly id: number;
      readonly body: RecordBody;
      readonly ifMatch?: readonly number[];
    }
  | { readonly kind: 'delete'; readonly id: number; readonly ifMatch?: readonly number[] };

export interface WriteOutcome {
  readonly record: RecordJson;
  readonly created: boolean;
  /** The streams written, the record's first (read-your-writes); none when nothing changed. */
  readonly written: readonly WrittenStream[];
}

/** What a write decides on: the record at its id, the record its model's rules decide on with it, the time. */
interface LoadedRecord {
  readonly id: number;
  readonly state: RecordState;
  readonly related: RelatedState | undefined;
  readonly at: string;
}

/**
 * Record writes through the command handler: references resolved, the record loaded (and the record
 * its model's rules decide on with it, such as a shipment's fulfillment order), decided, and both
 * records' events appended with the unique-value reservations and the caller's `alongside` in one
 * transaction (a write that changes nothing commits `alongside` alone). A lost race is decided again on the new state, unless the client pinned its record's
 * version with If-Match (then it is a 412).
 */
export class RecordCommands {
  private readonly stock: StockLimits;

  constructor(
    private readonly store: EventStore,
    private readonly records: RecordStore,
    private readonly references: ReferenceResolver,
    private readonly unique: UniqueValues,
    private readonly clock: () => Date,
  ) {
    this.stock = new StockLimits(records, unique);
  }

  async write(
    model: ModelDefinition,
    context: WriteContext,
    request: WriteRequest,
    alongside?: Alongside,
  ): Promise<WriteOutcome> {
    const body =
      request.kind === 'delete' ? {} : await this.references.resolve(model, context.orgId, request.body);
    const creating = request.kind === 'create';
    let streamId = '';
    // A span per command, whoever issues it (a request, a process manager), saying what it writes.
    return inTracesOf(
      [],
      `command ${model.name}.${request.kind}`,
      'internal',
      () =>
        handleCommand(this.store, {
          load: async (): Promise<LoadedRecord> => {
            const id = creating ? (request.id ?? (await this.records.nextId())) : request.id;
            streamId = recordStreamId(model.name, id);
            describeActiveSpan({ 'ofp.record.id': id });
            // An id from the sequence is no record's yet, unless a create at a chosen id took it:
            // the append's version check refuses that, and the command is decided again on a new id.
            const state =
              creating && request.id === undefined
                ? ABSENT
                : await this.records.load(model, id, context.orgId, creating);
            const related = await this.loadRelated(
              model,
              context.orgId,
              creating ? body : state.status === 'live' ? state.record : undefined,
            );
            return { id, state, related, at: this.clock().toISOString() };
          },
          decide: (loaded) => this.decide(model, context, request, body, loaded, alongside),
          check: (decided) =>
            this.stock.check(
              context.orgId,
              decided.appends.map((append) => ({
                streamType: append.streamType,
                changes: append.events.map((event) => event.data as RecordChange),
              })),
            ),
          onRace: (error) => {
            // If-Match pins the client's record; a race on the related record is not the client's to lose.
            if (!(error instanceof WrongExpectedVersion) || error.streamId !== streamId) return;
            if (request.kind !== 'create' && request.ifMatch !== undefined)
              throw baseError(
                'PreconditionFailed',
                'The record was changed concurrently; If-Match no longer matches',
              );
            if (request.kind === 'create' && request.id !== undefined)
              throw fieldError('Conflict', 'id', 'has already been taken');
          },
        }),
      {
        'ofp.record.type': model.name,
        'ofp.organization.id': context.orgId,
      },
    );
  }

  /**
   * What a write does to the loaded record (and its related record): both records' events, with the
   * unique-value reservations and the caller's `alongside` to commit with them; `alongside` alone for a
   * write that changes nothing.
   */
  private decide(
    model: ModelDefinition,
    context: WriteContext,
    request: WriteRequest,
    body: RecordBody,
    { id, state, related, at }: LoadedRecord,
    alongside: Alongside | undefined,
  ): Decided<WriteOutcome> {
    const creating = request.kind === 'create';
    const decision = decide(model, this.command(request, id, body, context.by, at), state, related);
    const { events } = decision;
    if (events.length === 0) {
      if (state.status !== 'live') throw new Error('a decision without events needs a live record');
      const unchanged: WriteOutcome = { record: state.record, created: false, written: [] };
      return {
        appends: [],
        outcome: () => unchanged,
        ...(alongside && { alsoInTransaction: (client: PoolClient) => alongside(client, unchanged) }),
      };
    }
    const changes: RecordStreamChange[] = [{ model, orgId: context.orgId, id, state, events }];
    if (decision.related) changes.push({ ...decision.related, orgId: context.orgId });
    const appends = changes.map((change) => this.records.appendOf(change, context));
    const outcome = (results: AppendResults): WriteOutcome => ({
      record: events[events.length - 1]!.data.record,
      created: creating,
      written: appends.map((append): WrittenStream => ({
        streamId: append.streamId,
        streamType: append.streamType,
        orgId: context.orgId,
        changes: append.events.map((event) => event.data as RecordChange),
        ...results.get(append.streamId)!,
      })),
    });
    const reservation = reservationOf(model, creating, events);
    // A write with nothing to commit beside its events appends them alone (no transaction).
    if (!reservation && !alongside) return { appends, outcome };
    return {
      appends,
      outcome,
      alsoInTransaction: async (client, results) => {
        if (reservation) await this.moveReservations(client, model, context.orgId, id, reservation);
        await alongside?.(client, outcome(results));
      },
    };
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
    return { model: target, id, state: await this.records.load(target, id, orgId) };
  }

  private command(request: WriteRequest, id: number, body: RecordBody, by: Actor, at: string): RecordCommand {
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

  /** Moves the record's unique-value reservations to what its events set (or releases them on delete). */
  private async moveReservations(
    client: PoolClient,
    model: ModelDefinition,
    orgId: number,
    id: number,
    reservation: Reservation,
  ): Promise<void> {
    if (reservation === 'release') await this.unique.release(client, model.name, id);
    else await this.unique.reserve(client, orgId, model.name, id, reservation.released, reservation.values);
  }
}

/** What a write changes of its record's unique-value reservations. */
type Reservation =
  'release' | { readonly released: readonly string[]; readonly values: readonly UniqueValue[] };

/**
 * The reservations to move after `events`: all released on delete; else the old values of the unique
 * fields the events touched released and their new values reserved. A created record holds no
 * reservation yet: its append found its stream new in the same transaction, and a deleted record's
 * stream is never new again. Undefined when nothing changes.
 */
function reservationOf(
  model: ModelDefinition,
  created: boolean,
  events: readonly RecordEvent[],
): Reservation | undefined {
  const last = events[events.length - 1]!.data;
  if (last.deleted) return 'release';
  const uniqueFields = Object.entries(model.fields)
    .filter((entry): entry is [string, ColumnDefinition] => entry[1].kind === 'column' && entry[1].unique)
    .map(([name]) => name);
  const touched = created
    ? uniqueFields
    : uniqueFields.filter((name) => events.some((e) => name in e.data.previous));
  const values: UniqueValue[] = touched
    .map((field) => ({ field, value: last.record[field] }))
    .filter((v): v is UniqueValue => typeof v.value === 'string' && v.value !== '');
  const released = created ? [] : touched;
  return released.length === 0 && values.length === 0 ? undefined : { released, values };
}
