import { isDeepStrictEqual } from 'node:util';
import type { RecordJson } from '@ofp/contracts';
import type { ModelDefinition, WriteScope } from '@ofp/models';

/** A change as the generic rules decided it, for a model's own rules to complete and check. */
export interface DraftChange {
  /** The record before the change; undefined on create. */
  readonly before: RecordJson | undefined;
  /** The record after it: fields merged, the client's status move checked, version stamped. */
  readonly after: RecordJson;
  /** The related record the change decides on (a shipment's fulfillment order), when the model has one. */
  readonly related?: RecordJson;
}

/** A completed change: the record with its derived fields, and the related record's new state if it changes. */
export interface SettledChange {
  readonly record: RecordJson;
  readonly related?: RecordJson;
}

/** Another record a model's changes are decided on together with, in one transaction. */
export interface RelatedRecord {
  readonly model: () => ModelDefinition;
  /** Its id, read from the record being written (for a create, from the request's fields). */
  readonly idOf: (record: Readonly<Record<string, unknown>>) => number | undefined;
}

/**
 * A model's domain rules beyond the registry's: derived fields, invariants across fields, the
 * quantity-driven statuses, the event types of API.md §8 and the scope a change needs. All pure.
 */
export interface RecordRules {
  /**
   * Completes a change with its derived fields and refuses what the model forbids.
   * @throws DomainError (422 on a field path, 409 naming the states).
   */
  readonly settle: (change: DraftChange) => SettledChange;
  /** The event type, when more specific than `<singular>.created|updated` (`order.cancelled`). */
  readonly eventType: (before: RecordJson | undefined, after: RecordJson) => string | undefined;
  /** The scopes the change needs (API.md §7). */
  readonly scopes: (before: RecordJson | undefined, after: RecordJson) => readonly WriteScope[];
  readonly related?: RelatedRecord;
}

/** Rules for a model with none of its own: nothing derived, generic events, the model's write scope. */
export function plainRules(model: ModelDefinition): RecordRules {
  return {
    settle: ({ after }) => ({ record: after }),
    eventType: () => undefined,
    scopes: () => [model.writeScope],
  };
}

/**
 * Fields whose values a change changed, besides the bookkeeping every change touches. Values are
 * compared by value (API.md §5): nested objects whatever their key order (a stored record comes back
 * from jsonb with its keys reordered), lists element by element in order.
 */
export function changedFields(before: RecordJson | undefined, after: RecordJson): string[] {
  return Object.keys(after).filter(
    (name) => name !== 'updated_at' && name !== 'version' && !isDeepStrictEqual(after[name], before?.[name]),
  );
}

/** Whether a change moved the status into `status`. */
export function movedTo(before: RecordJson | undefined, after: RecordJson, status: string): boolean {
  return after.status === status && before?.status !== status;
}

/** A record's list of child objects (`lines`, `packages`), typed for reading. */
export function listOf<T>(record: Readonly<Record<string, unknown>> | undefined, name: string): T[] {
  const value = record?.[name];
  return Array.isArray(value) ? (value as T[]) : [];
}
