import type { RecordJson } from '@ofp/contracts';
import { orders } from '@ofp/models';
import { lineTotal } from './money.js';
import { listOf, movedTo, plainRules, type RecordRules } from './record-rules.js';

interface OrderLine {
  readonly quantity: number;
  readonly unit_price: string | null;
}

/** Orders: `total` is the sum of the lines; cancelling is announced as `order.cancelled`. */
export const orderRules: RecordRules = {
  ...plainRules(orders),
  settle: ({ after }) => ({
    record: {
      ...after,
      total: lineTotal(
        listOf<OrderLine>(after, 'lines').map((l) => ({ quantity: l.quantity, price: l.unit_price })),
      ),
    },
  }),
  eventType: (before, after) => (movedTo(before, after, 'cancelled') ? 'order.cancelled' : undefined),
};

/** The statuses an order's shipments drive (API.md §6); an order in another one is left alone. */
const QUANTITY_DRIVEN = ['pending', 'open', 'partially_fulfilled', 'fulfilled'];

/**
 * The status an order's fulfillment progress gives it: `fulfilled` once everything ordered has
 * shipped, `partially_fulfilled` once anything has, and back to `open` when cancelled shipments
 * leave nothing shipped. `undefined` when the status stays (on hold, cancelled, or unchanged).
 *
 * @param ordered what must ship: the larger of the order's line quantities and its fulfillment
 *   orders' (an integrator may push fulfillment orders for an order without lines)
 * @param shipped what its fulfillment orders have shipped
 */
export function orderProgressStatus(order: RecordJson, ordered: number, shipped: number): string | undefined {
  const current = String(order.status);
  if (!QUANTITY_DRIVEN.includes(current)) return undefined;
  const lines = listOf<OrderLine>(order, 'lines').reduce((sum, line) => sum + line.quantity, 0);
  const required = Math.max(lines, ordered);
  const next =
    shipped > 0 && shipped >= required
      ? 'fulfilled'
      : shipped > 0
        ? 'partially_fulfilled'
        : current === 'pending'
          ? 'pending'
          : 'open';
  return next === current ? undefined : next;
}
