import { DomainError, fieldError, type RecordJson } from '@ofp/contracts';
import { fulfillmentOrders, shipments, type WriteScope } from '@ofp/models';
import { changedFields, listOf, movedTo, plainRules, type RecordRules } from './record-rules.js';

// Fulfillment orders and their shipments. The fulfillment order is the consistency boundary of the
// shipped quantities: a shipment is decided on its fulfillment order's state, and the change to
// `lines[].quantity_shipped` commits with the shipment in one transaction (API.md §6).

interface FulfillmentLine {
  readonly sku: string;
  readonly quantity: number;
  readonly quantity_shipped?: number;
}

interface PackageLine {
  readonly sku: string;
  readonly quantity: number;
}

interface Package {
  readonly tracking_number: string | null;
  readonly tracking_url: string | null;
  readonly lines: readonly PackageLine[];
}

/** The statuses the shipped quantities decide; an on-hold, closed or cancelled order keeps its own. */
const SHIPPING_STATUSES = ['open', 'in_progress', 'partially_shipped', 'shipped'];
/** A shipment may be created while its fulfillment order is in one of these (API.md §6). */
const SHIPPABLE_STATUSES = ['open', 'in_progress', 'partially_shipped'];

/**
 * Fulfillment orders: `lines[].quantity_shipped` is the system's (kept across updates); lines can be
 * replaced only until something ships; `closed` is the operator's move; shipping everything is
 * announced as `fulfillment_order.shipped`, cancelling as `fulfillment_order.cancelled`.
 */
export const fulfillmentOrderRules: RecordRules = {
  ...plainRules(fulfillmentOrders),
  settle: ({ before, after }) => {
    const previous = listOf<FulfillmentLine>(before, 'lines');
    const shippedBefore = previous.some((line) => (line.quantity_shipped ?? 0) > 0);
    const lines = listOf<FulfillmentLine>(after, 'lines');
    const same =
      lines.length === previous.length &&
      lines.every((line, i) => line.sku === previous[i]!.sku && line.quantity === previous[i]!.quantity);
    if (shippedBefore && !same)
      throw fieldError('Unprocessable', 'lines', 'cannot change once shipping has started');
    return {
      record: withShippingStatus({
        ...after,
        lines: lines.map((line, i) => ({ ...line, quantity_shipped: previous[i]?.quantity_shipped ?? 0 })),
      }),
    };
  },
  eventType: (before, after) =>
    movedTo(before, after, 'shipped')
      ? 'fulfillment_order.shipped'
      : movedTo(before, after, 'cancelled')
        ? 'fulfillment_order.cancelled'
        : undefined,
  scopes: (before, after) => {
    const closing = movedTo(before, after, 'closed');
    const other = before === undefined || changedFields(before, after).some((name) => name !== 'status');
    const scopes: WriteScope[] = closing ? ['operations'] : [];
    return other || !closing ? ['write', ...scopes] : scopes;
  },
};

/**
 * Shipments: created on their fulfillment order's state (it must be shippable, and may not ship a sku
 * it does not hold or more than is still open: 422 naming the package line), adding what they ship to
 * its `quantity_shipped`; cancelling one gives the quantities back. What a shipment ships cannot
 * change afterwards (cancel it and create another), nor can its fulfillment order.
 */
export const shipmentRules: RecordRules = {
  ...plainRules(shipments),
  related: {
    model: () => fulfillmentOrders,
    idOf: (record) => record.fulfillment_order_id as number | undefined,
  },
  settle: ({ before, after, related }) => {
    if (before === undefined) {
      if (!related)
        throw fieldError('Unprocessable', 'fulfillment_order_id', 'must name an existing fulfillment order');
      return { record: after, related: ship(related, after) };
    }
    if (after.fulfillment_order_id !== before.fulfillment_order_id)
      throw fieldError('Unprocessable', 'fulfillment_order_id', 'cannot change; cancel the shipment instead');
    if (JSON.stringify(shippedBySku(before)) !== JSON.stringify(shippedBySku(after)))
      throw fieldError(
        'Unprocessable',
        'packages',
        'cannot change what the shipment ships; cancel it and create another',
      );
    // A deleted fulfillment order has nothing left to give back to.
    if (!movedTo(before, after, 'cancelled') || !related) return { record: after };
    return { record: after, related: giveBack(related, before) };
  },
  eventType: (before, after) => {
    if (before === undefined || after.status === 'cancelled') return undefined;
    if (movedTo(before, after, 'delivered')) return 'shipment.delivered';
    const tracking = (record: RecordJson) =>
      JSON.stringify([
        record.status,
        record.estimated_delivery_at,
        listOf<Package>(record, 'packages').map((p) => [p.tracking_number, p.tracking_url]),
      ]);
    return tracking(before) !== tracking(after) ? 'shipment.tracking_updated' : undefined;
  },
};

/** The fulfillment order after shipping `shipment`, or a DomainError naming what cannot ship. */
function ship(order: RecordJson, shipment: RecordJson): RecordJson {
  const status = String(order.status);
  if (!SHIPPABLE_STATUSES.includes(status))
    throw new DomainError('Conflict', {
      fulfillment_order_id: [
        `fulfillment order ${order.id} is ${status}; shipments can be created while it is ${SHIPPABLE_STATUSES.join(', ')}`,
      ],
    });
  const lines = listOf<FulfillmentLine>(order, 'lines').map((line) => ({
    ...line,
    quantity_shipped: line.quantity_shipped ?? 0,
  }));
  listOf<Package>(shipment, 'packages').forEach((pack, p) => {
    pack.lines.forEach((packageLine, l) => {
      const at = `packages[${p}].lines[${l}]`;
      const matching = lines.filter((line) => line.sku === packageLine.sku);
      if (matching.length === 0)
        throw fieldError('Unprocessable', `${at}.sku`, `is not on fulfillment order ${order.id}`);
      const open = matching.reduce((sum, line) => sum + line.quantity - line.quantity_shipped, 0);
      if (packageLine.quantity > open)
        throw fieldError(
          'Unprocessable',
          `${at}.quantity`,
          `ships ${packageLine.quantity} of ${packageLine.sku}, but only ${open} ${open === 1 ? 'is' : 'are'} still open on fulfillment order ${order.id}`,
        );
      let left = packageLine.quantity;
      for (const line of matching) {
        const taken = Math.min(left, line.quantity - line.quantity_shipped);
        line.quantity_shipped += taken;
        left -= taken;
      }
    });
  });
  return withShippingStatus({ ...order, lines });
}

/** The fulfillment order after a cancelled shipment gave back what it shipped (latest lines first). */
function giveBack(order: RecordJson, shipment: RecordJson): RecordJson {
  const lines = listOf<FulfillmentLine>(order, 'lines').map((line) => ({
    ...line,
    quantity_shipped: line.quantity_shipped ?? 0,
  }));
  for (const [sku, quantity] of Object.entries(shippedBySku(shipment))) {
    let left = quantity;
    for (const line of [...lines].reverse()) {
      if (line.sku !== sku) continue;
      const returned = Math.min(left, line.quantity_shipped);
      line.quantity_shipped -= returned;
      left -= returned;
    }
  }
  return withShippingStatus({ ...order, lines });
}

function shippedBySku(shipment: RecordJson): Record<string, number> {
  const totals: Record<string, number> = {};
  for (const pack of listOf<Package>(shipment, 'packages'))
    for (const line of pack.lines) totals[line.sku] = (totals[line.sku] ?? 0) + line.quantity;
  return Object.fromEntries(Object.entries(totals).sort(([a], [b]) => (a < b ? -1 : 1)));
}

/**
 * The status the shipped quantities give a fulfillment order in a shipping status: `shipped` when
 * every line has shipped, `partially_shipped` when some has, and `in_progress` when cancelled
 * shipments leave nothing shipped of an order that had started shipping.
 */
function withShippingStatus(order: RecordJson): RecordJson {
  const status = String(order.status);
  if (!SHIPPING_STATUSES.includes(status)) return order;
  const lines = listOf<FulfillmentLine>(order, 'lines');
  const shipped = lines.reduce((sum, line) => sum + (line.quantity_shipped ?? 0), 0);
  const ordered = lines.reduce((sum, line) => sum + line.quantity, 0);
  const next =
    shipped === 0
      ? status === 'open' || status === 'in_progress'
        ? status
        : 'in_progress'
      : shipped === ordered
        ? 'shipped'
        : 'partially_shipped';
  return { ...order, status: next };
}
