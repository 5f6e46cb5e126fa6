import { DomainError, type RecordChange } from '@ofp/contracts';
import { inventory } from '@ofp/models';
import {
  STOCK_KEY_FIELD,
  STOCK_SOURCES,
  stockChanges,
  stockKey,
  stockLimitErrors,
  type Stock,
  type StockKey,
} from '../domain/inventory.js';
import type { RecordStore } from './record-store.js';
import type { UniqueValues } from './unique-values.js';

/** The changes decided on one stream, by its stream type (model name). */
export interface DecidedChanges {
  readonly streamType: string;
  readonly changes: readonly RecordChange[];
}

const NO_STOCK: Stock = { on_hand: 0, committed: 0, inbound: 0 };

/**
 * Refuses a write whose stock changes would take an inventory total beyond 32 bits (API.md §1), before
 * it is appended: the inventory manager derives the totals later, and must be able to apply whatever
 * was appended. Reads the inventory records of the (sku, warehouse) pairs the write moves.
 */
export class StockLimits {
  constructor(
    private readonly records: RecordStore,
    private readonly unique: UniqueValues,
  ) {}

  /** @throws DomainError `Unprocessable` naming each total (`on_hand`) that would leave its bounds. */
  async check(orgId: number, decided: readonly DecidedChanges[]): Promise<void> {
    const changes = new Map<string, Stock & StockKey>();
    for (const { streamType, changes: recordChanges } of decided) {
      if (!(STOCK_SOURCES as readonly string[]).includes(streamType)) continue;
      for (const recordChange of recordChanges)
        for (const [key, change] of stockChanges(streamType, recordChange)) {
          const sum = changes.get(key);
          changes.set(key, sum ? { ...sum, ...addedStock(sum, change) } : change);
        }
    }
    if (changes.size === 0) return;
    const ids = await this.unique.lookupAll(orgId, inventory.name, STOCK_KEY_FIELD, [...changes.keys()]);
    const current = new Map<string, Stock>();
    await Promise.all(
      [...ids].map(async ([key, id]) => {
        const state = await this.records.load(inventory, id, orgId);
        if (state.status === 'live') current.set(key, state.record as unknown as Stock);
      }),
    );
    const errors = stockLimitErrors(changes.values(), (key) => current.get(stockKey(key)) ?? NO_STOCK);
    if (Object.keys(errors).length > 0) throw new DomainError('Unprocessable', errors);
  }
}

function addedStock(a: Stock, b: Stock): Stock {
  return {
    on_hand: a.on_hand + b.on_hand,
    committed: a.committed + b.committed,
    inbound: a.inbound + b.inbound,
  };
}
