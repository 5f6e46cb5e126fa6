import { DomainError, baseError, fieldError, type RecordChange, type RecordJson } from '@ofp/contracts';
import {
  transitionError,
  type FieldDefinition,
  type FieldMap,
  type ModelDefinition,
  type RecordBody,
} from '@ofp/models';

/** A record's state, folded from its stream. */
export type RecordState =
  | { readonly status: 'absent' }
  | { readonly status: 'live'; readonly record: RecordJson; readonly heldFrom?: string }
  | { readonly status: 'deleted'; readonly version: number };

export const ABSENT: RecordState = { status: 'absent' };

export type RecordCommand =
  | { readonly kind: 'create'; readonly id: number; readonly fields: RecordBody; readonly at: string }
  | { readonly kind: 'update'; readonly fields: RecordBody; readonly at: string; readonly ifMatch?: number }
  | { readonly kind: 'delete'; readonly at: string; readonly ifMatch?: number };

/** A decided change: the event type and its data. */
export interface RecordEvent {
  readonly type: string;
  readonly data: RecordChange;
}

/**
 * Decides what a command does to a record (pure): the events to append, or a DomainError.
 * An update that changes nothing decides no event.
 */
export function decide(model: ModelDefinition, command: RecordCommand, state: RecordState): RecordEvent[] {
  switch (command.kind) {
    case 'create': {
      if (state.status !== 'absent') throw fieldError('Conflict', 'id', 'has already been taken');
      const record = createdRecord(model, command);
      return [{ type: `${model.singular}.created`, data: { record, previous: {}, deleted: false } }];
    }
    case 'update': {
      const current = live(state, command.ifMatch);
      const changed = Object.keys(command.fields).filter(
        (name) => JSON.stringify(command.fields[name]) !== JSON.stringify(current.record[name]),
      );
      if (changed.length === 0) return [];
      const heldFrom = nextHeldFrom(model, current, command.fields);
      const record = stamp(
        model,
        { ...current.record, ...command.fields },
        current.record.version + 1,
        command.at,
      );
      const previous = Object.fromEntries(changed.map((name) => [name, current.record[name]]));
      const data: RecordChange = {
        record,
        previous,
        deleted: false,
        ...(heldFrom === undefined ? {} : { heldFrom }),
      };
      return [{ type: `${model.singular}.updated`, data }];
    }
    case 'delete': {
      const current = live(state, command.ifMatch);
      if (!model.deletable) {
        throw new DomainError(
          'MethodNotAllowed',
          { base: [`${model.name} cannot be deleted`] },
          { Allow: 'GET, PUT, PATCH' },
        );
      }
      const record = stamp(model, current.record, current.record.version + 1, command.at);
      return [{ type: `${model.singular}.deleted`, data: { record, previous: {}, deleted: true } }];
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

function live(state: RecordState, ifMatch: number | undefined): Extract<RecordState, { status: 'live' }> {
  if (state.status !== 'live') throw baseError('NotFound', 'Record not found');
  if (ifMatch !== undefined && ifMatch !== state.record.version) {
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
    if (field.kind === 'list' && Array.isArray(nested)) {
      ordered[name] = nested.map((element: Record<string, unknown>) => inFieldOrder(field.fields, element));
    } else if (field.kind === 'object' && nested !== null && typeof nested === 'object') {
      ordered[name] = inFieldOrder(field.fields, nested as Record<string, unknown>);
    } else if (field.kind === 'reference' && nested !== null && typeof nested === 'object') {
      const reference = nested as Record<string, unknown>;
      ordered[name] = Object.fromEntries(['id', ...field.display].map((key) => [key, reference[key]]));
    } else {
      ordered[name] = nested;
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
    record[name] = command.fields[name] ?? emptyValue(field);
  }
  const machine = model.stateMachine;
  if (machine) {
    const requested = command.fields[machine.column];
    if (typeof requested === 'string' && requested !== machine.initial) {
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
      return null;
    default: {
      const unhandled: never = field;
      throw new Error(`unhandled field ${JSON.stringify(unhandled)}`);
    }
  }
}

/**
 * Checks a requested status move and returns what the record's `heldFrom` becomes: set when the
 * record goes on hold, cleared when it leaves the hold, kept otherwise.
 */
function nextHeldFrom(
  model: ModelDefinition,
  current: Extract<RecordState, { status: 'live' }>,
  fields: RecordBody,
): string | undefined {
  const machine = model.stateMachine;
  if (!machine || !(machine.column in fields)) return current.heldFrom;
  const from = String(current.record[machine.column]);
  const to = String(fields[machine.column]);
  const error = transitionError(machine, from, to, current.heldFrom);
  if (error) throw error;
  if (from === to) return current.heldFrom;
  if (machine.hold && to === machine.hold.state) return from;
  return undefined;
}
