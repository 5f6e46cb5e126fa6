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
import { followOnMetadata, type ProcessManager, type SourceEvent } from './process-manager.js';

/**
 * Keeps the inventory records (API.md §6) from the events that move stock: for each event, the
 * change of every (sku, warehouse) it touches is appended to that inventory record (created on first
 * use) at its expected version, all in one transaction with the event's handled mark. A lost race
 * is decided again on the new versions (the command handler), so concurrent changes are never lost
 * and a redelivered event is never counted twice.
 */
export class InventoryManager implements ProcessManager {
  readonly name = 'inventory';
  readonly streamTypes = STOCK_SOURCES;
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
      await handleCommand(
        this.store,
        async () => {
          const decided = await Promise.all(changes.map((change) => this.decideChange(orgId, change)));
          const metadata = followOnMetadata(this.name, event);
          return {
            appends: decided.map(({ id, state, events }) =>
              this.records.appendOf({ model: inventory, orgId, id, state, events }, metadata),
            ),
            alsoInTransaction: async (client) => {
              for (const { id, state, key } of decided) {
                if (state.status === 'absent')
                  await this.unique.reserve(
                    client,
                    orgId,
                    inventory.name,
                    id,
                    [STOCK_KEY_FIELD],
                    [{ field: STOCK_KEY_FIELD, value: stockKey(key) }],
                  );
              }
              await this.handled.markHandled(client, event);
            },
            outcome: () => undefined,
          };
        },
        // Another first use of the same key took its unique value: decided again, it finds the record.
        { isRace: (error) => isDomainError(error) && error.kind === 'Conflict' },
      );
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

  /** The inventory record of a (sku, warehouse) after a change, as a command decided by the system. */
  private async decideChange(orgId: number, change: Stock & StockKey) {
    const key: StockKey = { sku: change.sku, warehouse: change.warehouse };
    const existing = await this.unique.lookup(orgId, inventory.name, STOCK_KEY_FIELD, stockKey(key));
    const id = existing ?? (await this.records.nextId());
    const state: RecordState =
      existing === undefined ? { status: 'absent' } : await this.records.load(inventory, id, orgId);
    if (state.status === 'deleted') throw new DomainError('Conflict', { base: ['inventory record deleted'] });
    const current = state.status === 'live' ? state.record : { on_hand: 0, committed: 0, inbound: 0 };
    const fields = {
      item_id: (await this.unique.lookup(orgId, items.name, 'sku', key.sku)) ?? null,
      sku: key.sku,
      warehouse: key.warehouse,
      on_hand: Number(current.on_hand) + change.on_hand,
      committed: Number(current.committed) + change.committed,
      inbound: Number(current.inbound) + change.inbound,
    };
    const at = this.clock().toISOString();
    const by = { kind: 'system' } as const;
    const { events } = decide(
      inventory,
      state.status === 'absent' ? { kind: 'create', id, fields, at, by } : { kind: 'update', fields, at, by },
      state,
    );
    return { id, state, key, events };
  }
}
