import type { RecordJson } from '@ofp/contracts';
import { returns, type WriteScope } from '@ofp/models';
import { linesEdited, receive, receives, type Receiving, type ReceivingLine } from './receiving.js';
import { changedFields, movedTo, plainRules, type RecordRules } from './record-rules.js';

interface ReturnLine extends ReceivingLine {
  readonly disposition?: 'restock' | 'dispose' | null;
}

const RECEIVING: Receiving<ReturnLine> = {
  ready: 'authorized',
  // What is received was put back on the shelf or not: that cannot be undone by editing the line.
  fixed: ['sku', 'disposition'],
  complete: (line, previous) => ({
    ...line,
    disposition: line.disposition ?? previous?.disposition ?? 'restock',
  }),
};

/** The status moves that are the operator's (API.md §6); the others (cancelling, closing) are the integrator's. */
const OPERATOR_MOVES: readonly unknown[] = ['authorized', 'rejected', 'refunded'];

/**
 * Returns (RMAs): the integrator asks for one (`requested`), the operator authorizes or rejects it,
 * receives it (receiving.ts) while authorized or partly received, which decides `partially_received`
 * and `received` (announced as `return.received`, with `received_at` set unless given), and refunds
 * it. A line's `disposition` is `restock` unless given, and keeps its value when a PUT leaves it out.
 * The inventory effect (received `restock` quantities on hand) is in inventory.ts.
 */
export const returnRules: RecordRules = {
  ...plainRules(returns),
  settle: ({ before, after }) => {
    const { lines, status } = receive(RECEIVING, before, after);
    const arrived = status === 'received' && before?.status !== 'received';
    return {
      record: {
        ...after,
        status,
        received_at: after.received_at ?? (arrived ? after.updated_at : null),
        lines,
      },
    };
  },
  eventType: (before, after) => (movedTo(before, after, 'received') ? 'return.received' : undefined),
  scopes: (before, after) => {
    const receiving = receives(before, after);
    const operator =
      receiving ||
      after.received_at !== (before?.received_at ?? null) ||
      (after.status !== before?.status && OPERATOR_MOVES.includes(after.status));
    const integrator =
      before === undefined ||
      changedFields(before, after).some((name) => isIntegrators(name, before, after, receiving));
    const scopes: WriteScope[] = operator ? ['operations'] : [];
    return integrator || !operator ? ['write', ...scopes] : scopes;
  },
};

/** Whether a changed field is the integrator's to change: anything but receiving and the operator's moves. */
function isIntegrators(name: string, before: RecordJson, after: RecordJson, receiving: boolean): boolean {
  switch (name) {
    case 'status':
      return after.status === 'cancelled' || after.status === 'closed';
    case 'received_at':
      return false;
    case 'lines':
      return !receiving || linesEdited(before, after);
    default:
      return true;
  }
}
