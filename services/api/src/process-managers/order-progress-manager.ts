import type { RecordChange } from '@ofp/contracts';
import type { StoredEvent } from '@ofp/event-store';
import { orders } from '@ofp/models';
import type { Pool, PoolClient } from '@ofp/runtime';
import { decide, type RecordState } from '../commands/record-decider.js';
import { WrongExpectedVersion, type RecordStore } from '../commands/record-store.js';
import { listOf } from '../domain/record-rules.js';
import { orderProgressStatus } from '../domain/orders.js';
import { AlreadyHandled, HandledEvents } from './handled-events.js';
import type { ProcessManager } from './process-manager.js';

const MAX_ATTEMPTS = 40;

/** What one fulfillment order holds for its order and has shipped of it. */
interface FulfillmentProgress {
  readonly quantity: number;
  readonly shipped: number;
}

interface FulfillmentLine {
  readonly quantity: number;
  readonly quantity_shipped?: number;
}

/**
 * Moves orders into `partially_fulfilled` and `fulfilled` (API.md §6) as their fulfillment orders
 * ship: it keeps what each fulfillment order of an order holds and has shipped (`api.order_progress`),
 * and decides the order's status from their sums as a system command. The progress row, the order's
 * event and the handled mark commit together; the row's version makes a concurrent update of the
 * same order lose and decide again.
 */
export class OrderProgressManager implements ProcessManager {
  readonly name = 'order-progress';
  readonly streamTypes = ['fulfillment_orders'];
  private readonly handled: HandledEvents;

  constructor(
    private readonly pool: Pool,
    private readonly records: RecordStore,
    private readonly clock: () => Date,
  ) {
    this.handled = new HandledEvents(pool, this.name);
  }

  async handle(event: StoredEvent): Promise<void> {
    const orgId = event.orgId;
    if (orgId === null || (await this.handled.wasHandled(event))) return;
    const change = event.data as RecordChange;
    const orderId = typeof change.record.order_id === 'number' ? change.record.order_id : undefined;
    for (let attempt = 1; ; attempt++) {
      try {
        if (orderId === undefined) {
          await this.records.append([], this.metadata(event), (client) =>
            this.handled.markHandled(client, event),
          );
          return;
        }
        const stored = await this.progressOf(orderId);
        const progress: Record<string, FulfillmentProgress> = {
          ...stored.fulfillment,
          [change.record.id]: progressOf(change),
        };
        const totals = Object.values(progress).reduce(
          (sum, entry) => ({ quantity: sum.quantity + entry.quantity, shipped: sum.shipped + entry.shipped }),
          { quantity: 0, shipped: 0 },
        );
        const loaded = await this.records.load(orders, orderId);
        const state: RecordState = loaded.orgId === orgId ? loaded.state : { status: 'absent' };
        const status =
          state.status === 'live'
            ? orderProgressStatus(state.record, totals.quantity, totals.shipped)
            : undefined;
        const events =
          status === undefined
            ? []
            : decide(
                orders,
                {
                  kind: 'update',
                  fields: { status },
                  at: this.clock().toISOString(),
                  by: { kind: 'system' },
                },
                state,
              ).events;
        await this.records.append(
          [{ model: orders, orgId, id: orderId, state, events }],
          this.metadata(event),
          async (client) => {
            await saveProgress(client, orgId, orderId, progress, stored.version);
            await this.handled.markHandled(client, event);
          },
        );
        return;
      } catch (error) {
        if (error instanceof AlreadyHandled) return;
        const raced = error instanceof WrongExpectedVersion || error instanceof ProgressRaced;
        if (!raced || attempt >= MAX_ATTEMPTS) throw error;
      }
    }
  }

  private metadata(event: StoredEvent) {
    return { actor: 'system', requestId: `${this.name}:${event.eventId}` };
  }

  private async progressOf(
    orderId: number,
  ): Promise<{ fulfillment: Record<string, FulfillmentProgress>; version: number }> {
    const { rows } = await this.pool.query<{
      fulfillment: Record<string, FulfillmentProgress>;
      version: number;
    }>('SELECT fulfillment, version FROM api.order_progress WHERE order_id = $1', [orderId]);
    return rows[0] ?? { fulfillment: {}, version: 0 };
  }
}

/** What a fulfillment order counts for its order: a cancelled or deleted one only what it shipped. */
function progressOf(change: RecordChange): FulfillmentProgress {
  const lines = listOf<FulfillmentLine>(change.record, 'lines');
  const shipped = lines.reduce((sum, line) => sum + (line.quantity_shipped ?? 0), 0);
  const active = !change.deleted && change.record.status !== 'cancelled';
  return { quantity: active ? lines.reduce((sum, line) => sum + line.quantity, 0) : shipped, shipped };
}

/** Another handler updated the order's progress first. */
class ProgressRaced extends Error {}

async function saveProgress(
  client: PoolClient,
  orgId: number,
  orderId: number,
  fulfillment: Record<string, FulfillmentProgress>,
  version: number,
): Promise<void> {
  const result = await client.query(
    `INSERT INTO api.order_progress (order_id, org_id, fulfillment, version) VALUES ($1, $2, $3, 1)
     ON CONFLICT (order_id) DO UPDATE SET fulfillment = EXCLUDED.fulfillment, version = api.order_progress.version + 1
       WHERE api.order_progress.version = $4`,
    [orderId, orgId, JSON.stringify(fulfillment), version],
  );
  if (result.rowCount === 0) throw new ProgressRaced(`order ${orderId} progress changed concurrently`);
}
