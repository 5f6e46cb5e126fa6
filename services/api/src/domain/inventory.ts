import type { FieldErrors, RecordChange, RecordJson } from '@ofp/contracts';
import { INT32, inventory, isModelName, type ModelName } from '@ofp/models';
import { listOf, plainRules, type RecordRules } from './record-rules.js';

// Inventory (API.md §6) is a projection kept as event-sourced records, one per (sku, warehouse):
// adjustments add `quantity_delta` to `on_hand`; a fulfillment order commits its open line
// quantities until they ship or it is cancelled (or closed), and what it ships leaves `on_hand`;
// a purchase order adds its unreceived quantities to `inbound` while open or partly received, and
// what it receives joins `on_hand`; what a return receives joins `on_hand` on its `restock` lines
// (the `dispose` ones never reach the shelf). Shipments act through their fulfillment order's
// `quantity_shipped`, which changes in the same transaction as the shipment.

/** Quantities of one (sku, warehouse), or changes to them. */
export interface Stock {
  readonly on_hand: number;
  readonly committed: number;
  readonly inbound: number;
}

/** Where stock is counted. */
export interface StockKey {
  readonly sku: string;
  readonly warehouse: string | null;
}

/** Inventory records: `available` is `on_hand - committed`. */
export const inventoryRules: RecordRules = {
  ...plainRules(inventory),
  settle: ({ after }) => ({
    record: { ...after, available: Number(after.on_hand) - Number(after.committed) },
  }),
};

/**
 * A record's standing effect on stock: what it puts in `on_hand`, `committed` and `inbound`, line by
 * line, in its warehouse (`deleted`: the record as it was when deleted).
 */
type StockEffect = (record: RecordJson, deleted: boolean, put: (sku: string, stock: Stock) => void) => void;

/** What each model's records do to stock; null for a model whose records move none. */
const STOCK_EFFECTS: Readonly<Record<ModelName, StockEffect | null>> = {
  phone_number_types: null,
  people: null,
  items: null,
  orders: null,
  fulfillment_orders: (record, deleted, put) => {
    const committing = !deleted && record.status !== 'cancelled' && record.status !== 'closed';
    for (const line of listOf<Line>(record, 'lines')) {
      const shipped = line.quantity_shipped ?? 0;
      put(line.sku, { on_hand: -shipped, committed: committing ? line.quantity - shipped : 0, inbound: 0 });
    }
  },
  // Through their fulfillment order's `quantity_shipped`, which changes in the same transaction.
  shipments: null,
  purchase_orders: (record, deleted, put) => {
    const expecting = !deleted && (record.status === 'open' || record.status === 'partially_received');
    for (const line of listOf<Line>(record, 'lines')) {
      const received = line.quantity_received ?? 0;
      put(line.sku, { on_hand: received, committed: 0, inbound: expecting ? line.quantity - received : 0 });
    }
  },
  invoices: null,
  returns: (record, _deleted, put) => {
    for (const line of listOf<Line>(record, 'lines'))
      if (line.disposition === 'restock')
        put(line.sku, { on_hand: line.quantity_received ?? 0, committed: 0, inbound: 0 });
  },
  inventory: null,
  inventory_adjustments: (record, deleted, put) => {
    if (!deleted)
      put(String(record.sku), { on_hand: Number(record.quantity_delta), committed: 0, inbound: 0 });
  },
};

/** The stream types (models) whose events move stock. */
export const STOCK_SOURCES: readonly ModelName[] = (Object.keys(STOCK_EFFECTS) as ModelName[]).filter(
  (name) => STOCK_EFFECTS[name] !== null,
);

/**
 * What one event changes in stock, by (sku, warehouse): the effect of the record after the change
 * minus the effect before it (`previous` holds the changed fields' old values). Zero changes are left out.
 */
export function stockChanges(streamType: string, change: RecordChange): Map<string, Stock & StockKey> {
  const created = change.record.version === 1;
  // A deletion's record is the record as it was; an update's `previous` turns it back into that.
  const before = created
    ? new Map<string, Stock & StockKey>()
    : effects(streamType, change.deleted ? change.record : { ...change.record, ...change.previous }, false);
  const result = effects(streamType, change.record, change.deleted);
  for (const [key, stock] of before) add(result, key, stock, -1);
  for (const [key, stock] of result)
    if (stock.on_hand === 0 && stock.committed === 0 && stock.inbound === 0) result.delete(key);
  return result;
}

/** The key of a (sku, warehouse) in maps and in the inventory's unique-value reservation. */
export function stockKey(key: StockKey): string {
  return JSON.stringify([key.sku, key.warehouse]);
}

/** The unique-value field that makes one inventory record per (sku, warehouse) and organization. */
export const STOCK_KEY_FIELD = 'sku_warehouse';

const STOCK_TOTALS = ['on_hand', 'committed', 'inbound'] as const;

/**
 * The stock totals a write would take beyond 32 bits, like a quantity (API.md §1), by total: each
 * change added to the stock its inventory record shows now. A total already beyond (writes decided
 * at the same moment, each within the bound: the records hold more, see the registry's inventory)
 * may still move back. Empty when every total stays within.
 */
export function stockLimitErrors(
  changes: Iterable<Stock & StockKey>,
  current: (key: StockKey) => Stock,
): FieldErrors {
  const errors: FieldErrors = {};
  for (const change of changes) {
    const now = current(change);
    for (const total of STOCK_TOTALS) {
      const next = now[total] + change[total];
      const outward = (next > INT32.max && change[total] > 0) || (next < INT32.min && change[total] < 0);
      if (outward)
        (errors[total] ??= []).push(
          `would be ${next} for sku ${JSON.stringify(change.sku)} in warehouse ${JSON.stringify(change.warehouse)}, beyond what it holds (${INT32.min} to ${INT32.max})`,
        );
    }
  }
  return errors;
}

interface Line {
  readonly sku: string;
  readonly quantity: number;
  readonly quantity_shipped?: number;
  readonly quantity_received?: number;
  readonly disposition?: string;
}

/** A record's standing effect on stock, by (sku, warehouse); none for a stream that moves no stock. */
function effects(streamType: string, record: RecordJson, deleted: boolean): Map<string, Stock & StockKey> {
  const result = new Map<string, Stock & StockKey>();
  const warehouse = (record.warehouse as string | null | undefined) ?? null;
  const effect = isModelName(streamType) ? STOCK_EFFECTS[streamType] : null;
  effect?.(record, deleted, (sku, stock) =>
    add(result, stockKey({ sku, warehouse }), { ...stock, sku, warehouse }, 1),
  );
  return result;
}

function add(map: Map<string, Stock & StockKey>, key: string, stock: Stock & StockKey, sign: 1 | -1): void {
  const current = map.get(key) ?? {
    sku: stock.sku,
    warehouse: stock.warehouse,
    on_hand: 0,
    committed: 0,
    inbound: 0,
  };
  map.set(key, {
    ...current,
    on_hand: current.on_hand + sign * stock.on_hand,
    committed: current.committed + sign * stock.committed,
    inbound: current.inbound + sign * stock.inbound,
  });
}
