import type { StoredEvent } from '@ofp/event-store';
import type { Pool, PoolClient } from '@ofp/runtime';

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
