import {
  baseError,
  DomainError,
  fieldError,
  missingScope,
  type RecordChange,
  type RecordJson,
} from '@ofp/contracts';
import {
  boundsErrors,
  transitionError,
  type FieldDefinition,
  type FieldMap,
  type ModelDefinition,
  type RecordBody,
} from '@ofp/models';
import { changedFields } from './record-rules.js';
import { rulesOf } from './rules-by-model.js';

/** A record's state, folded from its stream. */
export type RecordState =
  | { readonly status: 'absent' }
  | { readonly status: 'live'; readonly record: RecordJson; readonly heldFrom?: string }
  | { readonly status: 'deleted'; readonly version: number };

export const ABSENT: RecordState = { status: 'absent' };

/**
 * Who asks for a change: a client with its token's scopes, or the system (a process manager moving
 * a record into a quantity-driven status, which no client may set).
 */
export type Actor =
  { readonly kind: 'client'; readonly scopes: readonly string[] } | { readonly kind: 'system' };

export type RecordCommand =
  | {
      readonly kind: 'create';
      readonly id: number;
      readonly fields: RecordBody;
      readonly at: string;
      readonly by: Actor;
    }
  | {
      readonly kind: 'update';
      readonly fields: RecordBody;
      readonly at: string;
      readonly by: Actor;
      readonly ifMatch?: readonly number[];
    }
  | {
      readonly kind: 'delete';
      readonly at: string;
      readonly by: Actor;
      readonly ifMatch?: readonly number[];
    };

/** A decided change: the event type and its data. */
export interface RecordEvent {
  readonly type: string;
  readonly data: RecordChange;
}

/** A record a decision reads and may change besides its own (a shipment's fulfillment order). */
export interface RelatedState {
  readonly model: ModelDefinition;
  readonly id: number;
  readonly state: RecordState;
}

/** What a command decided: its record's events, and the related record's, to commit together. */
export interface Decision {
  readonly events: RecordEvent[];
  readonly related?: RelatedState & { readonly events: RecordEvent[] };
}

/**
 * Decides what a command does to a record (pure): the events to append, or a DomainError.
 * The generic rules (existence, If-Match, the client's status moves, holds) come first, then the
 * model's own (derived fields, invariants, scopes, event types). A change that changes nothing
 * decides no event.
 */
export function decide(
  model: ModelDefinition,
  command: RecordCommand,
  state: RecordState,
  related?: RelatedState,
): Decision {
  const rules = rulesOf(model);
  const relatedRecord = related?.state.status === 'live' ? related.state.record : undefined;
  switch (command.kind) {
    case 'create': {
      if (state.status !== 'absent') throw fieldError('Conflict', 'id', 'has already been taken');
      const settled = rules.settle({
        before: undefined,
        after: createdRecord(model, command),
        ...(relatedRecord ? { related: relatedRecord } : {}),
      });
      const record = withinBounds(model, stamp(model, settled.record, 1, command.at));
      requireScopes(rules.scopes(undefined, record), command.by);
      const type = cataloged(model, rules.eventType(undefined, record) ?? `${model.singular}.created`);
      return withRelated(
        { events: [{ type, data: { record, previous: {}, deleted: false } }] },
        related,
        settled.related,
        command.at,
      );
    }
    case 'update': {
      const current = live(state, command.ifMatch);
      const heldFrom = nextHeldFrom(model, current, command.fields, command.by);
      const version = current.record.version + 1;
      const settled = rules.settle({
        before: current.record,
        after: stamp(model, { ...current.record, ...command.fields }, version, command.at),
        ...(relatedRecord ? { related: relatedRecord } : {}),
      });
      const record = withinBounds(model, stamp(model, settled.record, version, command.at));
      const changed = changedFields(current.record, record);
      if (changed.length === 0) return { events: [] };
      requireScopes(rules.scopes(current.record, record), command.by);
      const previous = Object.fromEntries(changed.map((name) => [name, current.record[name]]));
      const data: RecordChange = {
        record,
        previous,
        deleted: false,
        ...(heldFrom === undefined ? {} : { heldFrom }),
      };
      const type = cataloged(model, rules.eventType(current.record, record) ?? `${model.singular}.updated`);
      return withRelated({ events: [{ type, data }] }, related, settled.related, command.at);
    }
    case 'delete': {
      const current = live(state, command.ifMatch);
      requireScopes([model.writeScope], command.by);
      const record = stamp(model, current.record, current.record.version + 1, command.at);
      return {
        events: [
          {
            type: cataloged(model, `${model.singular}.deleted`),
            data: { record, previous: {}, deleted: true },
          },
        ],
      };
    }
    default: {
      const unhandled: never = command;
      throw new Error(`unhandled command ${JSON.stringify(unhandled)}`);
    }
  }
}

/** The state after an event. Events carry the whole record, so the state is the last event's record. */
export function evolve(_state: RecordState, change: RecordChange): RecordState {
  if (change.deleted) return { status: 'deleted', version: change.record.version };
  return change.heldFrom === undefined
    ? { status: 'live', record: change.record }
    : { status: 'live', record: change.record, heldFrom: change.heldFrom };
}

/** Adds the related record's change, when the model's rules changed it, as its next version. */
function withRelated(
  decision: Decision,
  related: RelatedState | undefined,
  next: RecordJson | undefined,
  at: string,
): Decision {
  if (!related || related.state.status !== 'live' || next === undefined) return decision;
  const current = related.state;
  const rules = rulesOf(related.model);
  const record = withinBounds(related.model, stamp(related.model, next, current.record.version + 1, at));
  const changed = changedFields(current.record, record);
  if (changed.length === 0) return decision;
  const data: RecordChange = {
    record,
    previous: Object.fromEntries(changed.map((name) => [name, current.record[name]])),
    deleted: false,
    ...(current.heldFrom === undefined ? {} : { heldFrom: current.heldFrom }),
  };
  const type = cataloged(
    related.model,
    rules.eventType(current.record, record) ?? `${related.model.singular}.updated`,
  );
  return { ...decision, related: { ...related, events: [{ type, data }] } };
}

/**
 * An event type the model announces (its registry entry's catalog, API.md §8): subscribers and the
 * published descriptions know only those, so deciding another is a bug in the rules.
 */
function cataloged(model: ModelDefinition, type: string): string {
  if (!model.eventTypes.some((known) => known.type === type))
    throw new Error(`${model.name} decided event type ${type}, which its registry entry does not declare`);
  return type;
}

/**
 * A decided record whose every number fits its column (API.md §1): a derived total that would not
 * (an order's `total` over 15 digits, an invoice line's `amount`) is a 422 naming it, so that whatever
 * is appended, every read model and subscriber can apply.
 */
function withinBounds(model: ModelDefinition, record: RecordJson): RecordJson {
  const errors = boundsErrors(model.fields, record);
  for (const _ in errors) throw new DomainError('Unprocessable', errors);
  return record;
}

/** A client's token must hold every scope the change needs (API.md §7); the system needs none. */
function requireScopes(needed: readonly string[], by: Actor): void {
  if (by.kind === 'system') return;
  const missing = needed.find((scope) => !by.scopes.includes(scope));
  if (missing !== undefined) throw missingScope(missing);
}

function live(
  state: RecordState,
  ifMatch: readonly number[] | undefined,
): Extract<RecordState, { status: 'live' }> {
  if (state.status !== 'live') throw baseError('NotFound', 'Record not found');
  if (ifMatch !== undefined && !ifMatch.includes(state.record.version)) {
    throw baseError(
      'PreconditionFailed',
      `If-Match does not match the current version ${state.record.version}`,
    );
  }
  return state;
}

/**
 * The record at its new version, its keys in registry order: a record loaded from the event store
 * comes out of jsonb, which does not keep key order.
 */
function stamp(
  model: ModelDefinition,
  record: Readonly<Record<string, unknown>>,
  version: number,
  at: string,
): RecordJson {
  return inFieldOrder(model.fields, { ...record, updated_at: at, version }) as unknown as RecordJson;
}

function inFieldOrder(fields: FieldMap, value: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const ordered: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(fields)) {
    const nested = value[name];
    if (field.kind === 'joined') continue;
    if (field.kind === 'list' && Array.isArray(nested)) {
      ordered[name] = nested.map((element: Record<string, unknown>) => inFieldOrder(field.fields, element));
    } else if (field.kind === 'object' && nested !== null && typeof nested === 'object') {
      ordered[name] = inFieldOrder(field.fields, nested as Record<string, unknown>);
    } else if (field.kind === 'reference' && nested !== null && typeof nested === 'object') {
      const reference = nested as Record<string, unknown>;
      ordered[name] = Object.fromEntries(['id', ...field.display].map((key) => [key, reference[key]]));
    } else {
      ordered[name] = nested ?? emptyValue(field);
    }
  }
  return ordered;
}

/** A new record: every field in registry order, defaults and nulls for what was not given. */
function createdRecord(
  model: ModelDefinition,
  command: Extract<RecordCommand, { kind: 'create' }>,
): RecordJson {
  const record: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(model.fields)) {
    if (field.kind !== 'joined') record[name] = command.fields[name] ?? emptyValue(field);
  }
  const machine = model.stateMachine;
  if (machine) {
    const requested = command.fields[machine.column];
    if (typeof requested === 'string' && requested !== machine.initial && command.by.kind === 'client') {
      const error = transitionError(machine, machine.initial, requested);
      if (error) throw error;
    }
    record[machine.column] = requested ?? machine.initial;
  }
  return {
    ...record,
    id: command.id,
    created_at: command.at,
    updated_at: command.at,
    version: 1,
  };
}

function emptyValue(field: FieldDefinition): unknown {
  switch (field.kind) {
    case 'list':
      return [];
    case 'column':
      return 'default' in field ? (field.default ?? null) : null;
    case 'object':
    case 'reference':
    case 'joined':
      return null;
    default: {
      const unhandled: never = field;
      throw new Error(`unhandled field ${JSON.stringify(unhandled)}`);
    }
  }
}

/**
 * Checks a client's status move and returns what the record's `heldFrom` becomes: set when the
 * record goes on hold, cleared when it leaves the hold, kept otherwise. The system's moves are the
 * quantity-driven ones, decided by the model's rules, and are not checked here.
 */
function nextHeldFrom(
  model: ModelDefinition,
  current: Extract<RecordState, { status: 'live' }>,
  fields: RecordBody,
  by: Actor,
): string | undefined {
  const machine = model.stateMachine;
  if (!machine || !(machine.column in fields)) return current.heldFrom;
  const from = String(current.record[machine.column]);
  const to = String(fields[machine.column]);
  if (by.kind === 'client') {
    const error = transitionError(machine, from, to, current.heldFrom);
    if (error) throw error;
  }
  if (from === to) return current.heldFrom;
  if (machine.hold && to === machine.hold.state) return from;
  return undefined;
}
