import { inTransaction, type Pool, type PoolClient } from '@ofp/runtime';
import type { StoredEvent } from './types.js';

/** Postgres NOTIFY channel raised by every change to the parked events (parked, retried, released). */
export const PARKED_CHANNEL = 'es_parked';

/** An event a consumer group could not apply, as operators see it (API.md §12). */
export interface ParkedEvent {
  readonly id: number;
  readonly consumerGroup: string;
  readonly eventId: string;
  readonly eventType: string;
  readonly streamId: string;
  readonly streamType: string;
  readonly version: number;
  readonly orgId: number | null;
  /** Why the consumer could not apply it, from its last attempt. */
  readonly reason: string;
  /** Attempts so far, retries included. */
  readonly attempts: number;
  readonly parkedAt: Date;
  /** When an operator asked for a retry that no consumer has taken up yet; null otherwise. */
  readonly retryRequestedAt: Date | null;
  /** The stream's later events that wait behind it in the same group. */
  readonly waiting: number;
}

/** A stream held in a consumer group: its events wait behind a parked one. */
export interface HeldStream {
  readonly consumerGroup: string;
  readonly streamId: string;
}

interface ParkedRow {
  id: string;
  consumer_group: string;
  event_id: string;
  type: string;
  stream_id: string;
  stream_type: string;
  version: number;
  org_id: number | null;
  reason: string;
  attempts: number;
  parked_at: Date;
  retry_requested_at: Date | null;
  waiting: number;
}

const PARKED_COLUMNS = `p.id, p.consumer_group, p.event_id, e.type, p.stream_id, e.stream_type, p.version,
  e.org_id, p.reason, p.attempts, p.parked_at, p.retry_requested_at,
  (SELECT count(*)::int FROM es.parked_events w
    WHERE w.consumer_group = p.consumer_group AND w.stream_id = p.stream_id AND w.version > p.version) AS waiting`;

function toParkedEvent(row: ParkedRow): ParkedEvent {
  return {
    id: Number(row.id),
    consumerGroup: row.consumer_group,
    eventId: row.event_id,
    eventType: row.type,
    streamId: row.stream_id,
    streamType: row.stream_type,
    version: row.version,
    orgId: row.org_id,
    reason: row.reason,
    attempts: row.attempts,
    parkedAt: row.parked_at,
    retryRequestedAt: row.retry_requested_at,
    waiting: row.waiting,
  };
}

/** Serializes the changes to one group's stream (parking, holding, releasing). */
async function lockStream(client: PoolClient, group: string, streamId: string): Promise<void> {
  await client.query('SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))', [
    `parked:${group}`,
    streamId,
  ]);
}

/**
 * The parked events of every consumer group (table `es.parked_events`). Per group and stream, the
 * event of the lowest version is the parked one, with its reason; the stream's later events wait
 * behind it, so one record's events are applied in order, while every other stream goes on.
 */
export class ParkedEvents {
  constructor(private readonly pool: Pool) {}

  /** Every stream that waits behind a parked event, per group. */
  async heldStreams(): Promise<HeldStream[]> {
    const { rows } = await this.pool.query<{ consumer_group: string; stream_id: string }>(
      'SELECT DISTINCT consumer_group, stream_id FROM es.parked_events',
    );
    return rows.map((row) => ({ consumerGroup: row.consumer_group, streamId: row.stream_id }));
  }

  /**
   * Puts `event` behind its stream's parked event in `group`, if the stream has one: true then;
   * false when the stream is not held (any longer), and the event is the consumer's to apply.
   */
  async hold(group: string, event: StoredEvent): Promise<boolean> {
    return inTransaction(this.pool, async (client) => {
      await lockStream(client, group, event.streamId);
      const { rows } = await client.query(
        'SELECT 1 FROM es.parked_events WHERE consumer_group = $1 AND stream_id = $2 LIMIT 1',
        [group, event.streamId],
      );
      if (rows.length === 0) return false;
      await client.query(
        `INSERT INTO es.parked_events (consumer_group, event_id, stream_id, version)
         VALUES ($1, $2, $3, $4) ON CONFLICT (consumer_group, event_id) DO NOTHING`,
        [group, event.eventId, event.streamId, event.version],
      );
      await client.query(`SELECT pg_notify('${PARKED_CHANNEL}', '')`);
      return true;
    });
  }

  /** Parks `event` in `group` with the reason of its last failed attempt. */
  async park(group: string, event: StoredEvent, reason: string, attempts: number): Promise<void> {
    await inTransaction(this.pool, async (client) => {
      await lockStream(client, group, event.streamId);
      await client.query(
        `INSERT INTO es.parked_events (consumer_group, event_id, stream_id, version, reason, attempts)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (consumer_group, event_id) DO UPDATE
           SET reason = excluded.reason, attempts = es.parked_events.attempts + excluded.attempts,
               parked_at = now()`,
        [group, event.eventId, event.streamId, event.version, reason, attempts],
      );
      await client.query(`SELECT pg_notify('${PARKED_CHANNEL}', '')`);
    });
  }

  /** The first event of a held stream in `group` (the parked one), if the stream is still held. */
  async first(group: string, streamId: string): Promise<{ id: number; eventId: string } | undefined> {
    const { rows } = await this.pool.query<{ id: string; event_id: string }>(
      `SELECT id, event_id FROM es.parked_events WHERE consumer_group = $1 AND stream_id = $2
       ORDER BY version LIMIT 1`,
      [group, streamId],
    );
    return rows[0] && { id: Number(rows[0].id), eventId: rows[0].event_id };
  }

  /** Forgets an event its consumer has now applied (the stream goes free with its last one). */
  async release(group: string, streamId: string, id: number): Promise<void> {
    await inTransaction(this.pool, async (client) => {
      await lockStream(client, group, streamId);
      await client.query('DELETE FROM es.parked_events WHERE id = $1', [id]);
      await client.query(`SELECT pg_notify('${PARKED_CHANNEL}', '')`);
    });
  }

  /** A page of the parked events (those waiting behind them are counted, not listed), oldest first. */
  async list(page: {
    limit: number;
    offset: number;
    consumerGroup?: string;
  }): Promise<{ parked: ParkedEvent[]; total: number }> {
    const where = 'p.reason IS NOT NULL AND ($1::text IS NULL OR p.consumer_group = $1)';
    const [{ rows }, count] = await Promise.all([
      this.pool.query<ParkedRow>(
        `SELECT ${PARKED_COLUMNS} FROM es.parked_events p JOIN es.events e USING (event_id)
         WHERE ${where} ORDER BY p.id LIMIT $2 OFFSET $3`,
        [page.consumerGroup ?? null, page.limit, page.offset],
      ),
      this.pool.query<{ total: number }>(
        `SELECT count(*)::int AS total FROM es.parked_events p WHERE ${where}`,
        [page.consumerGroup ?? null],
      ),
    ]);
    return { parked: rows.map(toParkedEvent), total: count.rows[0]?.total ?? 0 };
  }

  /**
   * Asks the consumer group to apply a parked event again, then the events waiting behind it, in
   * order; resolves with it, or undefined when no event of that id is parked.
   */
  async requestRetry(id: number): Promise<ParkedEvent | undefined> {
    return inTransaction(this.pool, async (client) => {
      const { rows } = await client.query<ParkedRow>(
        `WITH requested AS (
           UPDATE es.parked_events SET retry_requested_at = now()
           WHERE id = $1 AND reason IS NOT NULL RETURNING id)
         SELECT ${PARKED_COLUMNS}, now() AS retry_requested_at
         FROM es.parked_events p JOIN es.events e USING (event_id) WHERE p.id IN (SELECT id FROM requested)`,
        [id],
      );
      if (rows[0]) await client.query(`SELECT pg_notify('${PARKED_CHANNEL}', '')`);
      return rows[0] && toParkedEvent(rows[0]);
    });
  }

  /** Takes up the retries asked for in these groups: the streams to apply again, each once. */
  async claimRetries(groups: readonly string[]): Promise<HeldStream[]> {
    const { rows } = await this.pool.query<{ consumer_group: string; stream_id: string }>(
      `UPDATE es.parked_events SET retry_requested_at = NULL
       WHERE consumer_group = ANY($1::text[]) AND retry_requested_at IS NOT NULL
       RETURNING consumer_group, stream_id`,
      [groups],
    );
    const streams = new Map(rows.map((row) => [`${row.consumer_group}\u0000${row.stream_id}`, row]));
    return [...streams.values()].map((row) => ({
      consumerGroup: row.consumer_group,
      streamId: row.stream_id,
    }));
  }

  /** How many events are parked (not counting those waiting behind them), per consumer group. */
  async counts(): Promise<Map<string, number>> {
    const { rows } = await this.pool.query<{ consumer_group: string; parked: number }>(
      `SELECT consumer_group, count(*)::int AS parked FROM es.parked_events
       WHERE reason IS NOT NULL GROUP BY consumer_group`,
    );
    return new Map(rows.map((row) => [row.consumer_group, row.parked]));
  }
}
