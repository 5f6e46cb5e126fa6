import { DomainError, fieldError } from '@ofp/contracts';

/**
 * The statuses a model's records move through (API.md §6). Clients move a record with
 * `PUT {"status": ...}`; the system makes the moves into `derived` states from quantities.
 */
export interface StateMachine {
  /** The enumerated string column holding the state, usually `status`. */
  readonly column: string;
  /** The state of a new record. */
  readonly initial: string;
  /**
   * Allowed moves by current state, the system's moves into derived states included. The system
   * decides those from quantities (a cancelled shipment can also take a record back a step).
   */
  readonly transitions: Readonly<Record<string, readonly string[]>>;
  /** States only the system sets (starred in API.md §6); a client asking for one gets a 422. */
  readonly derived: readonly string[];
  /**
   * A hold: entered from any of `from`, and left back to the state the record had before it (besides
   * the moves `transitions` lists for the hold state, such as cancelling).
   */
  readonly hold?: { readonly state: string; readonly from: readonly string[] };
}

/**
 * Why a client may not move a record from `from` to `to`, or `undefined` when it may.
 * `beforeHold` is the state the record had when it was put on hold (when it is on hold).
 * A derived target is a 422 on the column; any other illegal move is a 409 naming both states.
 */
export function transitionError(
  machine: StateMachine,
  from: string,
  to: string,
  beforeHold?: string,
): DomainError | undefined {
  if (from === to) return undefined;
  if (machine.derived.includes(to))
    return fieldError('Unprocessable', machine.column, `cannot be set to ${to}: the system sets it`);
  if (isAllowed(machine, from, to, beforeHold)) return undefined;
  return new DomainError('Conflict', { [machine.column]: [`cannot move from ${from} to ${to}`] });
}

function isAllowed(machine: StateMachine, from: string, to: string, beforeHold: string | undefined): boolean {
  const { hold } = machine;
  if (hold && to === hold.state) return hold.from.includes(from);
  if (hold && from === hold.state && to === beforeHold) return true;
  return machine.transitions[from]?.includes(to) ?? false;
}
