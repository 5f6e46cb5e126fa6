import { prepared, type Pool, type PostgresSession } from '@ofp/runtime';

/** Where every change of webhooks.webhooks or webhooks.webhooks__events is announced (migration 011). */
export const SUBSCRIBERS_CHANNEL = 'webhook_subscribers';
/**
 * How long an organization's subscribers are used from memory at most, should their change's
 * notification be lost: a hung link the session has not yet given up on (up to its heartbeat's
 * 15 s) misses notifications without a `resumed` to follow.
 */
const SUBSCRIBERS_MAX_AGE_MS = 1_000;

/** An enabled endpoint and the event types it subscribes to (or `*`). */
export interface Subscriber {
  readonly id: number;
  readonly events: readonly string[];
}

/** The enabled endpoints of the organizations, with the event types they subscribe to, by organization. */
export async function enabledSubscribers(
  pool: Pool,
  orgIds: readonly number[],
): Promise<Map<number, Subscriber[]>> {
  const byOrg = new Map<number, Subscriber[]>();
  if (orgIds.length === 0) return byOrg;
  const { rows } = await pool.query<{ id: number; org_id: number; events: string[] }>(
    prepared(
      `SELECT w.id, w.org_id, array_remove(array_agg(e.type ORDER BY e.ordinal), NULL) AS events
         FROM webhooks.webhooks w
         LEFT JOIN webhooks.webhooks__events e ON e.record_id = w.id
        WHERE w.enabled AND w.org_id = ANY($1::bigint[])
        GROUP BY w.id, w.org_id`,
      [orgIds],
    ),
  );
  for (const { id, org_id: orgId, events } of rows)
    byOrg.set(orgId, [...(byOrg.get(orgId) ?? []), { id, events }]);
  return byOrg;
}

/**
 * The enabled subscribers of each organization, kept in memory (the event intake's lookup was one
 * statement per batch of events, about one per person write: issue 25 item 5). Every change of an
 * endpoint or its subscriptions raises a notification on {@link SUBSCRIBERS_CHANNEL} when it commits
 * (a trigger of each table), which every process's cache hears on its session and forgets all it
 * holds. While the session is away nothing is kept (a notification could be missed), and when it
 * comes back everything is forgotten; a lookup that a notification overtook is not kept either (it may
 * have read before the change). {@link forget} drops an organization whose change the caller learned
 * of otherwise (a webhook's own event in the batch, which commits with the change). An entry is used
 * at most {@link SUBSCRIBERS_MAX_AGE_MS} after its lookup began.
 */
export class SubscriberCache {
  private readonly byOrg = new Map<number, { readonly subscribers: Subscriber[]; readonly at: number }>();
  /** Bumped by each notification and reconnection: a lookup begun before one is not kept. */
  private generation = 0;
  private listening: Promise<unknown> | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly session: PostgresSession,
    private readonly maxAgeMs = SUBSCRIBERS_MAX_AGE_MS,
  ) {}

  /** Listens for changes (once; later calls wait for the first). */
  async start(): Promise<void> {
    const forgetAll = (): void => {
      this.generation++;
      this.byOrg.clear();
    };
    await (this.listening ??= this.session.listen(SUBSCRIBERS_CHANNEL, {
      notify: forgetAll,
      resumed: forgetAll,
    }));
  }

  forget(orgId: number): void {
    this.byOrg.delete(orgId);
  }

  /** The enabled subscribers of the organizations, by organization (none: an empty list). */
  async of(orgIds: readonly number[]): Promise<Map<number, Subscriber[]>> {
    const now = performance.now();
    const keeping = this.listening !== undefined && this.session.connected();
    const found = new Map<number, Subscriber[]>();
    const missing: number[] = [];
    for (const orgId of orgIds) {
      const entry = keeping ? this.byOrg.get(orgId) : undefined;
      if (entry && now - entry.at < this.maxAgeMs) found.set(orgId, entry.subscribers);
      else missing.push(orgId);
    }
    if (missing.length === 0) return found;
    const generation = this.generation;
    const looked = await enabledSubscribers(this.pool, missing);
    const kept = keeping && generation === this.generation && this.session.connected();
    for (const orgId of missing) {
      const subscribers = looked.get(orgId) ?? [];
      found.set(orgId, subscribers);
      if (kept) this.byOrg.set(orgId, { subscribers, at: now });
    }
    return found;
  }
}

/**
 * Whether an endpoint gets an event of `type`: it names the type or `*`, and the event is not about the
 * endpoint itself (`about`: a webhook's own changes, the failure of one of its deliveries), which goes
 * to the organization's other endpoints only.
 */
export function subscribes(subscriber: Subscriber, type: string, about?: number): boolean {
  if (about === subscriber.id) return false;
  return subscriber.events.includes('*') || subscriber.events.includes(type);
}
