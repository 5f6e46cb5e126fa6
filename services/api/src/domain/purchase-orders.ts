import { purchaseOrders, type WriteScope } from '@ofp/models';
import { lineTotal } from './money.js';
import { linesEdited, receive, receives, type Receiving, type ReceivingLine } from './receiving.js';
import { changedFields, movedTo, plainRules, type RecordRules } from './record-rules.js';

interface PurchaseOrderLine extends ReceivingLine {
  readonly unit_cost: string | null;
}

const RECEIVING: Receiving<PurchaseOrderLine> = { ready: 'open', fixed: ['sku'] };

/**
 * Purchase orders: `total` from the lines; receiving (receiving.ts) while open or partly received
 * decides `partially_received` and `received` (announced as `purchase_order.received`). Receiving is
 * the operator's change.
 */
export const purchaseOrderRules: RecordRules = {
  ...plainRules(purchaseOrders),
  settle: ({ before, after }) => {
    const { lines, status } = receive(RECEIVING, before, after);
    return {
      record: {
        ...after,
        status,
        lines,
        total: lineTotal(lines.map((line) => ({ quantity: line.quantity, price: line.unit_cost }))),
      },
    };
  },
  eventType: (before, after) => (movedTo(before, after, 'received') ? 'purchase_order.received' : undefined),
  scopes: (before, after) => {
    const receiving = receives(before, after);
    const other = changedFields(before, after).some(
      (name) => name !== 'status' && (name !== 'lines' || !receiving || linesEdited(before, after)),
    );
    const scopes: WriteScope[] = receiving ? ['operations'] : [];
    return before === undefined || other || !receiving ? ['write', ...scopes] : scopes;
  },
};
