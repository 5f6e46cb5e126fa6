import type { RecordChange } from '@ofp/contracts';
import { DomainError, isDomainError, recordStreamId } from '@ofp/contracts';
import { handleCommand, type EventStore, type StoredEvent } from '@ofp/event-store';
import { inventory, items } from '@ofp/models';
import type { Pool } from '@ofp/runtime';
import { decide, type RecordState } from '../domain/record-decider.js';
import type { RecordStore } from '../commands/record-store.js';
import type { UniqueValues } from '../commands/unique-values.js';
import {
  STOCK_KEY_FIELD,
  STOCK_SOURCES,
  stockChanges,
  stockKey,
  type Stock,
  type StockKey,
} from '../domain/inventory.js';
import { AlreadyHandled, HandledEvents } from './handled-events.js';
import {
  followOnMetadata,
  type ProcessManager,
  type ProcessManagerSubscription,
  type SourceEvent,
} from './process-manager.js';

/** The inventory manager reads the events that move stock. */
export const INVENTORY_MANAGER: ProcessManagerSubscription = {
  name: 'inventory',
  streamTypes: STOCK_SOURCES,
};

/**
 * Keeps the inventory records (API.md §6) from the events that move stock: for each event, the
 * change of every (sku, warehouse) it touches is appended to that inventory record (created on first
 * use) at its expected version, all in one transaction with the event's handled mark. A lost race
 * is decided again on the new versions (the command handler), so concurrent changes are never lost
 * and a redelivered event is never counted twice.
 */
export class InventoryManager implements ProcessManager {
  readonly name = INVENTORY_MANAGER.name;
  readonly streamTypes = INVENTORY_MANAGER.streamTypes;
  readonly derives = [inventory.name];
  private readonly handled: HandledEvents;

  constructor(
    pool: Pool,
    private readonly store: EventStore,
    private readonly records: RecordStore,
    private readonly unique: UniqueValues,
    private readonly clock: () => Date,
  ) {
    this.handled = new HandledEvents(pool, this.name);
  }

  async handle(event: StoredEvent): Promise<void> {
    const orgId = event.orgId;
    if (orgId === null || (await this.handled.wasHandled(event))) return;
    const changes = [...stockChanges(event.streamType, event.data as RecordChange).values()];
    try {
      await handleCommand(this.store, {
        load: async (): Promise<LoadedStock[]> => {
          const at = this.clock().toISOString();
          return Promise.all(
            changes.map(async (change) => ({ ...(await this.loadStock(orgId, change)), at })),
          );
        },
        decide: (loaded) => {
          const decided = loaded.map(decideStock);
          const metadata = followOnMetadata(this.name, event);
          return {
            appends: decided.map(({ id, state, events }) =>
              this.records.appendOf({ model: inventory, orgId, id, state, events }, metadata),
            ),
            alsoInTransaction: async (client) => {
              for (const { id, state, change } of decided) {
                if (state.status === 'absent')
                  await this.unique.reserve(
                    client,
                    orgId,
                    inventory.name,
                    id,
                    [STOCK_KEY_FIELD],
                    [{ field: STOCK_KEY_FIELD, value: stockKey(change) }],
                  );
              }
              await this.handled.markHandled(client, event);
            },
            outcome: () => undefined,
          };
        },
        // Another first use of the same key took its unique value: decided again, it finds the record.
        isRace: (error) => isDomainError(error) && error.kind === 'Conflict',
      });
    } catch (error) {
      if (!(error instanceof AlreadyHandled)) throw error;
    }
  }

  /** The inventory records of the (sku, warehouse) pairs whose stock the event moves. */
  async appendsTo(event: SourceEvent): Promise<readonly string[]> {
    if (event.orgId === null) return [];
    const keys = [...stockChanges(event.streamType, event.data).values()].map(stockKey);
    const ids = await this.unique.lookupAll(event.orgId, inventory.name, STOCK_KEY_FIELD, keys);
    return [...ids.values()].map((id) => recordStreamId(inventory.name, id));
  }

  /** The inventory record of a change's (sku, warehouse), or the id it will take, and its item. */
  private async loadStock(orgId: number, change: Stock & StockKey): Promise<Omit<LoadedStock, 'at'>> {
    const existing = await this.unique.lookup(orgId, inventory.name, STOCK_KEY_FIELD, stockKey(change));
    const id = existing ?? (await this.records.nextId());
    const state: RecordState =
      existing === undefined ? { status: 'absent' } : await this.records.load(inventory, id, orgId);
    const itemId = (await this.unique.lookup(orgId, items.name, 'sku', change.sku)) ?? null;
    return { change, id, state, itemId };
  }
}

/** A stock change with the inventory record it moves, as loaded. */
interface LoadedStock {
  readonly change: Stock & StockKey;
  readonly id: number;
  readonly state: RecordState;
  readonly itemId: number | null;
  readonly at: string;
}

/** The inventory record of a (sku, warehouse) after a change, as a command decided by the system. */
function decideStock({ change, id, state, itemId, at }: LoadedStock) {
  if (state.status === 'deleted') throw new DomainError('Conflict', { base: ['inventory record deleted'] });
  const current = state.status === 'live' ? state.record : { on_hand: 0, committed: 0, inbound: 0 };
  const fields = {
    item_id: itemId,
    sku: change.sku,
    warehouse: change.warehouse,
    on_hand: Number(current.on_hand) + change.on_hand,
    committed: Number(current.committed) + change.committed,
    inbound: Number(current.inbound) + change.inbound,
  };
  const by = { kind: 'system' } as const;
  const { events } = decide(
    inventory,
    state.status === 'absent' ? { kind: 'create', id, fields, at, by } : { kind: 'update', fields, at, by },
    state,
  );
  return { id, state, change, events };
}
