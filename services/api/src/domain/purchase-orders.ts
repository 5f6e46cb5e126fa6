import { DomainError, fieldError } from '@ofp/contracts';
import { purchaseOrders, type WriteScope } from '@ofp/models';
import { lineTotal } from './money.js';
import { changedFields, listOf, movedTo, plainRules, type RecordRules } from './record-rules.js';

interface PurchaseOrderLine {
  readonly sku: string;
  readonly quantity: number;
  readonly quantity_received?: number | null;
  readonly unit_cost: string | null;
}

/** The statuses in which goods may be received, and which the received quantities then decide. */
const RECEIVING_STATUSES = ['open', 'partially_received', 'received'];

/**
 * Purchase orders: `total` from the lines; receiving is a PUT of `lines[].quantity_received` (a line
 * left without it keeps its value), which only grows, never past `quantity`, and only while the
 * order is open or partly received. The received quantities decide `partially_received` and
 * `received` (announced as `purchase_order.received`). Receiving is the operator's change.
 */
export const purchaseOrderRules: RecordRules = {
  ...plainRules(purchaseOrders),
  settle: ({ before, after }) => {
    const previous = listOf<PurchaseOrderLine>(before, 'lines');
    const lines = listOf<PurchaseOrderLine>(after, 'lines').map((line, index) => {
      const already = previous[index]?.quantity_received ?? 0;
      const received = line.quantity_received ?? already;
      const at = `lines[${index}].quantity_received`;
      if (received < already) throw fieldError('Unprocessable', at, `cannot decrease: ${already} received`);
      if (received > line.quantity)
        throw fieldError('Unprocessable', at, `must be at most the quantity ${line.quantity}`);
      if (received > 0 && previous[index] && previous[index].sku !== line.sku)
        throw fieldError('Unprocessable', `lines[${index}].sku`, 'cannot change once received');
      return { ...line, quantity_received: received };
    });
    previous.slice(lines.length).forEach((line, offset) => {
      if ((line.quantity_received ?? 0) > 0)
        throw fieldError(
          'Unprocessable',
          'lines',
          `line ${lines.length + offset} was received and cannot be removed`,
        );
    });
    const receivedNow = totalReceived(lines);
    const status = String(after.status);
    if (receivedNow > totalReceived(previous) && !RECEIVING_STATUSES.includes(status))
      throw new DomainError('Conflict', { status: [`cannot receive while ${status}`] });
    const ordered = lines.reduce((sum, line) => sum + line.quantity, 0);
    return {
      record: {
        ...after,
        status: RECEIVING_STATUSES.includes(status)
          ? receivedNow === 0
            ? 'open'
            : receivedNow === ordered
              ? 'received'
              : 'partially_received'
          : status,
        lines,
        total: lineTotal(lines.map((line) => ({ quantity: line.quantity, price: line.unit_cost }))),
      },
    };
  },
  eventType: (before, after) => (movedTo(before, after, 'received') ? 'purchase_order.received' : undefined),
  scopes: (before, after) => {
    const receiving = totalReceived(listOf(after, 'lines')) > totalReceived(listOf(before, 'lines'));
    const other = changedFields(before, after).some(
      (name) => name !== 'status' && (name !== 'lines' || !receiving || linesEdited(before, after)),
    );
    const scopes: WriteScope[] = receiving ? ['operations'] : [];
    return before === undefined || other || !receiving ? ['write', ...scopes] : scopes;
  },
};

function totalReceived(lines: readonly PurchaseOrderLine[]): number {
  return lines.reduce((sum, line) => sum + (line.quantity_received ?? 0), 0);
}

/** Whether lines changed other than in their received quantities. */
function linesEdited(
  before: Readonly<Record<string, unknown>> | undefined,
  after: Readonly<Record<string, unknown>>,
): boolean {
  const strip = (lines: PurchaseOrderLine[]) => lines.map(({ quantity_received: _, ...rest }) => rest);
  return JSON.stringify(strip(listOf(before, 'lines'))) !== JSON.stringify(strip(listOf(after, 'lines')));
}
