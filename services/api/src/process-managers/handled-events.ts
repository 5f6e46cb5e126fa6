import type { StoredEvent } from '@ofp/event-store';
import type { Pool, PoolClient } from '@ofp/runtime';

/** NOTIFY channel raised when a statement marked events handled (migration 003), at its commit. */
export const HANDLED_CHANNEL = 'api_handled';

/** The key of a (manager, source stream) in {@link handledVersions}' answer. */
export function handledKey(manager: string, streamId: string): string {
  return `${manager}\u0000${streamId}`;
}

/** The last version each (manager, source stream) handled, by {@link handledKey}; absent when none. */
export async function handledVersions(
  db: Pool,
  pairs: readonly { manager: string; streamId: string }[],
): Promise<Map<string, number>> {
  const { rows } = await db.query<{ manager: string; stream_id: string; version: number }>(
    `SELECT h.manager, h.stream_id, h.version
       FROM api.handled_streams h
       JOIN unnest($1::text[], $2::text[]) AS p (manager, stream_id) USING (manager, stream_id)`,
    [pairs.map((pair) => pair.manager), pairs.map((pair) => pair.streamId)],
  );
  return new Map(rows.map((row) => [handledKey(row.manager, row.stream_id), row.version]));
}

/**
 * Which source events a process manager has handled (`api.handled_streams`): the last version per
 * source stream. A bus delivers one stream's events in order and at least once, so an event at or
 * below that version was handled before.
 */
export class HandledEvents {
  constructor(
    private readonly pool: Pool,
    private readonly manager: string,
  ) {}

  async wasHandled(event: StoredEvent): Promise<boolean> {
    const { rows } = await this.pool.query<{ version: number }>(
      'SELECT version FROM api.handled_streams WHERE manager = $1 AND stream_id = $2',
      [this.manager, event.streamId],
    );
    return (rows[0]?.version ?? 0) >= event.version;
  }

  /**
   * Records the event as handled inside the transaction of the commands it led to.
   * @throws AlreadyHandled when a concurrent handler recorded it first (the caller's transaction
   *   then rolls back, so the commands are not applied twice).
   */
  async markHandled(client: PoolClient, event: StoredEvent): Promise<void> {
    const result = await client.query(
      `INSERT INTO api.handled_streams (manager, stream_id, version) VALUES ($1, $2, $3)
       ON CONFLICT (manager, stream_id) DO UPDATE SET version = EXCLUDED.version
         WHERE api.handled_streams.version < EXCLUDED.version`,
      [this.manager, event.streamId, event.version],
    );
    if (result.rowCount === 0) throw new AlreadyHandled(this.manager, event.streamId, event.version);
  }
}

/** Another handler recorded the event first. */
export class AlreadyHandled extends Error {
  constructor(manager: string, streamId: string, version: number) {
    super(`${manager} already handled ${streamId} version ${version}`);
  }
}
