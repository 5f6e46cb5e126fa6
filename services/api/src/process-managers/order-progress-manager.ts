import { recordStreamId, type RecordChange } from '@ofp/contracts';
import { handleCommand, type EventStore, type StoredEvent } from '@ofp/event-store';
import { orders } from '@ofp/models';
import type { Pool, PoolClient } from '@ofp/runtime';
import { decide, type RecordState } from '../domain/record-decider.js';
import type { RecordStore } from '../commands/record-store.js';
import { listOf } from '../domain/record-rules.js';
import { orderProgressStatus } from '../domain/orders.js';
import { AlreadyHandled, HandledEvents } from './handled-events.js';
import {
  followOnMetadata,
  type ProcessManager,
  type ProcessManagerSubscription,
  type SourceEvent,
} from './process-manager.js';

/** The order progress manager reads fulfillment orders. */
export const ORDER_PROGRESS_MANAGER: ProcessManagerSubscription = {
  name: 'order-progress',
  streamTypes: ['fulfillment_orders'],
};

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
  readonly name = ORDER_PROGRESS_MANAGER.name;
  readonly streamTypes = ORDER_PROGRESS_MANAGER.streamTypes;
  readonly derives = [orders.name];
  private readonly handled: HandledEvents;

  constructor(
    private readonly pool: Pool,
    private readonly store: EventStore,
    private readonly records: RecordStore,
    private readonly clock: () => Date,
  ) {
    this.handled = new HandledEvents(pool, this.name);
  }

  async handle(event: StoredEvent): Promise<void> {
    const orgId = event.orgId;
    if (orgId === null || (await this.handled.wasHandled(event))) return;
    const change = event.data as RecordChange;
    const entries = progressEntries(change);
    try {
      await handleCommand(this.store, {
        load: async (): Promise<LoadedOrder[]> => {
          const at = this.clock().toISOString();
          return Promise.all(
            entries.map(async ({ orderId, entry }) => ({
              orderId,
              entry,
              at,
              progress: await this.progressOf(orderId),
              state: await this.records.load(orders, orderId, orgId),
            })),
          );
        },
        decide: (loaded) => {
          const decided = loaded.map((order) => decideOrder(orgId, change.record.id, order));
          const metadata = followOnMetadata(this.name, event);
          return {
            appends: decided.map(({ order }) => this.records.appendOf(order, metadata)),
            alsoInTransaction: async (client) => {
              for (const { order, progress, version } of decided)
                await saveProgress(client, orgId, order.id, progress, version);
              await this.handled.markHandled(client, event);
            },
            outcome: () => undefined,
          };
        },
        isRace: (error) => error instanceof ProgressRaced,
      });
    } catch (error) {
      if (!(error instanceof AlreadyHandled)) throw error;
    }
  }

  /** The orders whose progress the fulfillment order's change moves. */
  appendsTo(event: SourceEvent): Promise<readonly string[]> {
    return Promise.resolve(
      progressEntries(event.data).map(({ orderId }) => recordStreamId(orders.name, orderId)),
    );
  }

  private async progressOf(orderId: number): Promise<StoredProgress> {
    const { rows } = await this.pool.query<StoredProgress>(
      'SELECT fulfillment, version FROM api.order_progress WHERE order_id = $1',
      [orderId],
    );
    return rows[0] ?? { fulfillment: {}, version: 0 };
  }
}

/** An order as its progress manager loads it: its progress, its record, one fulfillment order's entry. */
interface LoadedOrder {
  readonly orderId: number;
  /** The fulfillment order's entry in the order's progress, or `undefined` to take it out. */
  readonly entry: FulfillmentProgress | undefined;
  readonly progress: StoredProgress;
  readonly state: RecordState;
  readonly at: string;
}

interface StoredProgress {
  readonly fulfillment: Record<string, FulfillmentProgress>;
  readonly version: number;
}

/**
 * An order's progress with one fulfillment order's entry set (or taken out), and the order's status
 * change that follows from its sums, if any.
 */
function decideOrder(orgId: number, fulfillmentOrderId: number, loaded: LoadedOrder) {
  const { orderId, entry, progress: stored, state, at } = loaded;
  const { [fulfillmentOrderId]: _replaced, ...others } = stored.fulfillment;
  const progress = entry === undefined ? others : { ...others, [fulfillmentOrderId]: entry };
  const totals = Object.values(progress).reduce(
    (sum, each) => ({ quantity: sum.quantity + each.quantity, shipped: sum.shipped + each.shipped }),
    { quantity: 0, shipped: 0 },
  );
  const status =
    state.status === 'live' ? orderProgressStatus(state.record, totals.quantity, totals.shipped) : undefined;
  const events =
    status === undefined
      ? []
      : decide(orders, { kind: 'update', fields: { status }, at, by: { kind: 'system' } }, state).events;
  return { order: { model: orders, orgId, id: orderId, state, events }, progress, version: stored.version };
}

/**
 * The entries a fulfillment order's change sets in its orders' progress: its own in its order's, and
 * none in the order it moved from (that order's progress loses it).
 */
function progressEntries(
  change: RecordChange,
): { orderId: number; entry: FulfillmentProgress | undefined }[] {
  const orderId = orderIdOf(change.record);
  const movedFrom = Object.hasOwn(change.previous, 'order_id') ? orderIdOf(change.previous) : undefined;
  return [
    ...(movedFrom !== undefined && movedFrom !== orderId ? [{ orderId: movedFrom, entry: undefined }] : []),
    ...(orderId === undefined ? [] : [{ orderId, entry: progressOf(change) }]),
  ];
}

function orderIdOf(values: Readonly<Record<string, unknown>>): number | undefined {
  return typeof values.order_id === 'number' ? values.order_id : undefined;
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
