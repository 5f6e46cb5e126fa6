import { prepared, type Pool } from '@ofp/runtime';

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
 * Whether an endpoint gets an event of `type`: it names the type or `*`, and the event is not about the
 * endpoint itself (`about`: a webhook's own changes, the failure of one of its deliveries), which goes
 * to the organization's other endpoints only.
 */
export function subscribes(subscriber: Subscriber, type: string, about?: number): boolean {
  if (about === subscriber.id) return false;
  return subscriber.events.includes('*') || subscriber.events.includes(type);
}
