/** A record as the API renders it: `id`, its fields, nested lists and objects, `version`, timestamps. */
export type RecordJson = { readonly id: number; readonly version: number } & Readonly<
  Record<string, unknown>
>;

/**
 * The data of every record event (`person.created`, `order.cancelled`, ...): the record after the
 * change, the changed fields' values before it (webhooks' `previous_attributes`, API.md §8), and
 * whether the change deleted the record. Carrying the whole record makes projections idempotent by
 * version and lets a subscriber act on one event alone.
 */
export interface RecordChange {
  readonly record: RecordJson;
  readonly previous: Readonly<Record<string, unknown>>;
  readonly deleted: boolean;
  /** While the record is on hold: the state it returns to when released (API.md §6 state machines). */
  readonly heldFrom?: string;
}

/** The stream of a record: one per record, named by model and id. */
export function recordStreamId(model: string, id: number): string {
  return `${model}-${id}`;
}
