import type { Queryable } from '@ofp/models';
import { inTransaction, prepared, type Pool } from '@ofp/runtime';
import type { AttemptRecord } from './attempt.js';
import type { AttemptVerdict } from './retry-schedule.js';

/** NOTIFY channel raised when deliveries become due, so idle workers of every process wake at once. */
export const DELIVERIES_CHANNEL = 'webhook_deliveries';

/**
 * Advisory lock taken by each claim. Claims are short and serialized, so that the per-endpoint limit
 * holds across processes (two claims could otherwise both count the same free slots); the rows
 * themselves are taken `FOR UPDATE SKIP LOCKED`, so a claim never waits on a row another transaction
 * (a `retry`, a `recover`, a disable) is changing.
 */
const CLAIM_LOCK = "hashtext('ofp:webhook-claims')";

/**
 * The advisory lock space of endpoints' queues, keyed by webhook id: what queues a delivery again (a
 * recording that schedules a retry, `retry`, `recover`) holds an endpoint's lock shared, giving up its
 * queue (a disable, a delete) holds it exclusively. Whichever comes second then sees what the first
 * committed: a recording after a disable sees the endpoint disabled and gives its retry up; a disable
 * after a recording gives up the retry that the recording queued.
 */
const ENDPOINT_LOCK_SPACE = "hashtext('ofp:webhook-endpoints')";

/** The lock of endpoint `id` (an SQL expression) in {@link ENDPOINT_LOCK_SPACE}. */
function endpointLockKey(id: string): string {
  return `${ENDPOINT_LOCK_SPACE}, (${id} % 2147483647)::int`;
}

/** A delivery to queue: one event for one endpoint. */
export interface NewDelivery {
  readonly orgId: number;
  readonly webhookId: number;
  readonly eventId: string;
  readonly eventType: string;
  /** The record's stream and version (per-record order); null for `webhook.test`. */
  readonly streamId: string | null;
  readonly sequence: number | null;
  readonly payload: string;
  /** The trace context of the change, sent as `traceparent`. */
  readonly traceparent?: string | undefined;
}

/** A delivery a worker has claimed, with what it needs to send it. */
export interface ClaimedDelivery {
  readonly id: number;
  readonly orgId: number;
  readonly webhookId: number;
  readonly eventId: string;
  readonly eventType: string;
  /** The record's stream; null for `webhook.test`. */
  readonly streamId: string | null;
  readonly payload: string;
  readonly traceparent: string | null;
  /** Attempts of the current round before this one. */
  readonly roundAttempts: number;
  /** The claiming worker's key: its result is only recorded while the claim is still its own. */
  readonly claimedBy: number;
  readonly url: string;
  /** The current secret, then the previous one while a rotation is in its grace period. */
  readonly secrets: readonly string[];
}

/** An attempt and what it decided for its delivery. */
export interface FinishedAttempt {
  readonly delivery: ClaimedDelivery;
  readonly attempt: AttemptRecord;
  readonly verdict: AttemptVerdict;
}

export interface ClaimOptions {
  /** The claiming worker's advisory lock key. */
  readonly worker: number;
  /** Most deliveries to claim. */
  readonly limit: number;
  /** Most deliveries of one endpoint claimed at once (in flight, or about to be), across all workers. */
  readonly endpointConcurrency: number;
  /** How long a claim holds at most, should its worker hang without dying. */
  readonly leaseMs: number;
}

/** SQLSTATE 40P01. */
const DEADLOCK_DETECTED = '40P01';
const PASS_TURNS_ATTEMPTS = 5;

/** Whether delivery `d` is retried after a failure: its endpoint is enabled, or it is a test. */
const KEEPS_RETRYING = `(d.event_type = 'webhook.test' OR coalesce(
  (SELECT w.enabled FROM webhooks.webhooks w WHERE w.id = d.webhook_id AND w.org_id = d.org_id), false))`;

/**
 * The durable delivery queue in `webhooks.webhook_deliveries`. Every step is one statement or one
 * short transaction, so no transaction stays open while a request is on the wire: an open transaction
 * holding a transaction id would hold back every event-store reader (they read up to the oldest
 * transaction in flight).
 */
export class DeliveryQueue {
  constructor(private readonly pool: Pool) {}

  /**
   * Queues deliveries for endpoints that still exist (and are enabled, unless `includeDisabled`), once
   * per (endpoint, event): a repeated event changes nothing. Returns the new deliveries' ids.
   */
  async enqueue(
    deliveries: readonly NewDelivery[],
    now: Date,
    options: { includeDisabled: boolean } = { includeDisabled: false },
  ): Promise<number[]> {
    if (deliveries.length === 0) return [];
    const { rows } = await this.pool.query<{
      id: number;
      webhook_id: number;
      stream_id: string | null;
      head: boolean;
    }>(
      prepared(
        `WITH given AS (
         SELECT * FROM ROWS FROM (json_to_recordset($1::json) AS (org_id bigint, webhook_id bigint, event_id text,
           event_type text, stream_id text, sequence int, payload text, traceparent text)) WITH ORDINALITY
           AS g(org_id, webhook_id, event_id, event_type, stream_id, sequence, payload, traceparent, n)
       ), placed AS (
         SELECT g.*, row_number() OVER (PARTITION BY g.webhook_id, g.stream_id ORDER BY g.sequence, g.n) AS place
           FROM given g
       ), inserted AS (
         INSERT INTO webhooks.webhook_deliveries AS d (org_id, webhook_id, event_id, event_type, stream_id,
           sequence, payload, traceparent, status, head, attempts, next_attempt_at, created_at, updated_at, version)
         SELECT g.org_id, g.webhook_id, g.event_id, g.event_type, g.stream_id, g.sequence, g.payload, g.traceparent, 'pending',
                g.stream_id IS NULL OR g.place = 1 AND NOT EXISTS (${earlierOpen('g')}),
                0, $2, $2, $2, 1
           FROM placed g
           JOIN webhooks.webhooks w ON w.id = g.webhook_id AND w.org_id = g.org_id AND (w.enabled OR $3)
          ORDER BY g.n
         ON CONFLICT (webhook_id, event_id) DO NOTHING
         RETURNING d.id, d.org_id, d.webhook_id, d.stream_id, d.head
       ), counted AS (
         INSERT INTO webhooks.record_counts AS c (model, org_id, count)
         SELECT 'webhook_deliveries', org_id, count(*) FROM inserted GROUP BY org_id ORDER BY org_id
         ON CONFLICT (model, org_id) DO UPDATE SET count = c.count + EXCLUDED.count
       )
       SELECT id, webhook_id, stream_id, head FROM inserted ORDER BY id`,
        [
          // One JSON parameter: cheaper to build and to read than seven Postgres arrays.
          JSON.stringify(
            deliveries.map((d) => ({
              org_id: d.orgId,
              webhook_id: d.webhookId,
              event_id: d.eventId,
              event_type: d.eventType,
              stream_id: d.streamId,
              sequence: d.sequence,
              payload: d.payload,
              traceparent: d.traceparent ?? null,
            })),
          ),
          now,
          options.includeDisabled,
        ],
      ),
    );
    if (rows.length > 0) await this.pool.query(`SELECT pg_notify('${DELIVERIES_CHANNEL}', '')`);
    // Queued behind an open delivery of their record: if that one finished meanwhile, its turn-passing
    // could not see these yet; now it is this side's to pass (see `passTurns`).
    const waiting = rows.flatMap(({ webhook_id: webhookId, stream_id: streamId, head }) =>
      head || streamId === null ? [] : [{ webhookId, streamId }],
    );
    if (waiting.length > 0) await this.passTurns(waiting);
    return rows.map((row) => row.id);
  }

  /**
   * Claims due deliveries for a worker (status `sending`): oldest due first, never one whose record
   * has an earlier delivery to the same endpoint still pending or in flight (API.md §8: in `sequence`
   * order per endpoint), and no more per endpoint than its concurrency limit allows.
   */
  async claim(options: ClaimOptions, now: Date): Promise<ClaimedDelivery[]> {
    const client = await this.pool.connect();
    try {
      // The queue's statistics lag behind its churn, and a plan that reads every due row to sort them
      // costs a claim milliseconds per thousand rows queued: walk the due index in order instead.
      await client.query(
        `BEGIN; SET LOCAL enable_bitmapscan = off; SELECT pg_advisory_xact_lock(${CLAIM_LOCK})`,
      );
      const { rows } = await client.query<ClaimedRow>(
        prepared(
          `WITH due AS (
           SELECT d.id, d.webhook_id, d.next_attempt_at
             FROM webhooks.webhook_deliveries d
            WHERE d.status = 'pending' AND d.head AND d.next_attempt_at <= $1 AND NOT EXISTS (${earlierOpen('d')})
            ORDER BY d.next_attempt_at, d.id
            LIMIT $2
         ), ranked AS (
           SELECT due.*, row_number() OVER (PARTITION BY due.webhook_id ORDER BY due.next_attempt_at, due.id) AS place
             FROM due
         ), busy AS (
           SELECT s.webhook_id, count(*) AS sending
             FROM webhooks.webhook_deliveries s
            WHERE s.status = 'sending' AND s.webhook_id IN (SELECT webhook_id FROM due)
            GROUP BY s.webhook_id
         ), chosen AS (
           SELECT r.id FROM ranked r LEFT JOIN busy b ON b.webhook_id = r.webhook_id
            WHERE r.place + coalesce(b.sending, 0) <= $3
            ORDER BY r.next_attempt_at, r.id
            LIMIT $4
         ), locked AS (
           -- Only the rows taken are locked; one that changed since the scan is re-checked, or skipped.
           SELECT d.id FROM webhooks.webhook_deliveries d
            WHERE d.id IN (SELECT id FROM chosen) AND d.status = 'pending'
            FOR UPDATE SKIP LOCKED
         )
         UPDATE webhooks.webhook_deliveries d
            SET status = 'sending', claimed_by = $5, lease_expires_at = $6, updated_at = $1, version = d.version + 1
           FROM locked c, webhooks.webhooks w, webhooks.endpoints s
          WHERE d.id = c.id AND w.id = d.webhook_id AND s.webhook_id = d.webhook_id
         RETURNING d.id, d.org_id, d.webhook_id, d.event_id, d.event_type, d.stream_id, d.payload, d.traceparent, d.round_attempts, w.url,
                   s.secret, CASE WHEN s.previous_secret_expires_at > $1 THEN s.previous_secret END AS previous_secret`,
          [
            now,
            // Scanning further than the claim lets a saturated endpoint not starve the others behind it.
            options.limit * 2,
            options.endpointConcurrency,
            options.limit,
            options.worker,
            new Date(now.getTime() + options.leaseMs),
          ],
        ),
      );
      await client.query('COMMIT');
      return rows.map((row) => ({
        id: row.id,
        orgId: row.org_id,
        webhookId: row.webhook_id,
        eventId: row.event_id,
        eventType: row.event_type,
        streamId: row.stream_id,
        payload: row.payload,
        traceparent: row.traceparent,
        roundAttempts: row.round_attempts,
        claimedBy: options.worker,
        url: row.url,
        secrets: row.previous_secret === null ? [row.secret] : [row.secret, row.previous_secret],
      }));
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  }

  /**
   * Records finished attempts in one statement: each delivery's new state and its attempt-log row, and
   * each endpoint's health. An attempt whose claim was taken back meanwhile (its worker was presumed
   * dead) is not recorded: that delivery is queued again and will be sent again, with the same id.
   *
   * @returns the endpoints that now have to be disabled (API.md §8: a 410, or 5 days of failures).
   */
  async complete(
    finished: readonly FinishedAttempt[],
    now: Date,
    failingPeriodMs: number,
  ): Promise<number[]> {
    if (finished.length === 0) return [];
    const endpoints = [...new Set(finished.map(({ delivery }) => delivery.webhookId))].sort((a, b) => a - b);
    const { rows } = await inTransaction(this.pool, async (client) => {
      // Taken before the statement, whose snapshot then sees a disable that committed while it waited.
      await client.query(
        `SELECT pg_advisory_xact_lock_shared(${endpointLockKey('id')}) FROM unnest($1::bigint[]) AS id`,
        [endpoints],
      );
      return client.query<{ webhook_id: number | null; disable_reason: string | null }>(
        prepared(
          `WITH result AS (
         SELECT * FROM json_to_recordset($1::json) AS r(id bigint, claimed_by int, status text,
           next_attempt_at timestamptz, started_at timestamptz, duration_ms int, status_code int, error_kind text,
           error text, response_excerpt text, gone boolean)
       ), updated AS (
         -- An endpoint disabled (or deleted) while the attempt was under way gave up its queued deliveries
         -- then, but not this one: a retry of it is given up now (tests are sent to disabled ones too).
         UPDATE webhooks.webhook_deliveries d
            SET status = CASE WHEN r.status = 'pending' AND NOT ${KEEPS_RETRYING} THEN 'failed' ELSE r.status END,
                attempts = d.attempts + 1, round_attempts = d.round_attempts + 1,
                next_attempt_at = CASE WHEN r.status = 'pending' AND ${KEEPS_RETRYING} THEN r.next_attempt_at END,
                last_status_code = r.status_code, last_error = r.error,
                claimed_by = NULL, lease_expires_at = NULL, updated_at = $2, version = d.version + 1
           FROM result r
          WHERE d.id = r.id AND d.status = 'sending' AND d.claimed_by = r.claimed_by
         RETURNING d.id, d.org_id, d.webhook_id, d.attempts
       ), logged AS (
         INSERT INTO webhooks.webhook_deliveries__attempt_log
           (org_id, record_id, ordinal, started_at, duration_ms, status_code, error_kind, error, response_excerpt)
         SELECT u.org_id, u.id, u.attempts - 1, r.started_at, r.duration_ms, r.status_code, r.error_kind, r.error,
                r.response_excerpt
           FROM updated u JOIN result r ON r.id = u.id
       ), health AS (
         -- A success anywhere in the batch ends the endpoint's run of failures.
         SELECT u.webhook_id, bool_or(r.status = 'succeeded') AS succeeded, bool_or(r.gone) AS gone,
                min(r.started_at) FILTER (WHERE r.status <> 'succeeded') AS first_failure
           FROM updated u JOIN result r ON r.id = u.id
          GROUP BY u.webhook_id
       ), touched AS (
         UPDATE webhooks.endpoints s
          SET failing_since = CASE WHEN h.succeeded THEN NULL ELSE coalesce(s.failing_since, h.first_failure) END,
              disable_reason = coalesce(s.disable_reason, CASE
                WHEN h.gone THEN 'gone'
                WHEN NOT h.succeeded
                 AND coalesce(s.failing_since, h.first_failure) <= $2 - $3 * interval '1 millisecond' THEN 'failing'
              END)
         FROM health h
        WHERE s.webhook_id = h.webhook_id
       RETURNING s.webhook_id, s.disable_reason
       )
       -- Finished deliveries free endpoint slots and their records' next turns: wake every worker.
       SELECT t.webhook_id, t.disable_reason
         FROM (SELECT pg_notify('${DELIVERIES_CHANNEL}', '')) wake LEFT JOIN touched t ON true`,
          [
            JSON.stringify(
              finished.map(({ delivery, attempt, verdict }) => ({
                id: delivery.id,
                claimed_by: delivery.claimedBy,
                status: verdict.status,
                next_attempt_at: verdict.status === 'pending' ? verdict.nextAttemptAt : null,
                started_at: attempt.startedAt,
                duration_ms: attempt.durationMs,
                status_code: attempt.statusCode,
                error_kind: attempt.errorKind,
                error: attempt.error,
                response_excerpt: attempt.responseExcerpt,
                gone: verdict.status === 'failed' && verdict.disableEndpoint,
              })),
            ),
            now,
            failingPeriodMs,
          ],
        ),
      );
    });
    const finishedStreams = finished.flatMap(({ delivery, verdict }) =>
      verdict.status === 'pending' || delivery.streamId === null
        ? []
        : [{ webhookId: delivery.webhookId, streamId: delivery.streamId }],
    );
    if (finishedStreams.length > 0) await this.passTurns(finishedStreams);
    return rows.flatMap(({ webhook_id: id, disable_reason: reason }) =>
      id === null || reason === null ? [] : [id],
    );
  }

  /**
   * Queues a finished delivery again for a new round of attempts (`POST /v2/webhook_deliveries/{id}/retry`).
   * @returns false when the delivery is not finished (or not the organization's), or its endpoint is
   * disabled.
   */
  async retry(orgId: number, deliveryId: number, now: Date): Promise<boolean> {
    const requeued = await this.requeue(
      `id = $2 AND org_id = $3 AND status IN ('succeeded', 'failed')`,
      [now, deliveryId, orgId],
      {
        sql: 'SELECT webhook_id AS id FROM webhooks.webhook_deliveries WHERE id = $1 AND org_id = $2',
        values: [deliveryId, orgId],
      },
    );
    return requeued === 1;
  }

  /**
   * Queues again every given-up delivery of an endpoint queued since `since` (`POST /v2/webhooks/{id}/recover`).
   * @returns how many (none when the endpoint is disabled).
   */
  async recover(orgId: number, webhookId: number, since: Date, now: Date): Promise<number> {
    return this.requeue(
      `webhook_id = $2 AND org_id = $3 AND status = 'failed' AND created_at >= $4`,
      [now, webhookId, orgId, since],
      { sql: 'SELECT $1::bigint AS id', values: [webhookId] },
    );
  }

  /**
   * Queues again the deliveries `condition` selects (`$1` is now) while their endpoint (`endpoint`
   * selects its id) is enabled: under the endpoint's lock held shared, as recordings do, so that a
   * disable gives up what this queued, or this sees the disable.
   */
  private async requeue(
    condition: string,
    values: unknown[],
    endpoint: { sql: string; values: unknown[] },
  ): Promise<number> {
    const requeued = await inTransaction(this.pool, async (client) => {
      await client.query(
        `SELECT pg_advisory_xact_lock_shared(${endpointLockKey('e.id')}) FROM (${endpoint.sql}) e`,
        endpoint.values,
      );
      const { rowCount } = await client.query(
        `UPDATE webhooks.webhook_deliveries d SET ${REQUEUE}
          WHERE ${condition}
            AND (SELECT w.enabled FROM webhooks.webhooks w WHERE w.id = d.webhook_id AND w.org_id = d.org_id)`,
        values,
      );
      return rowCount ?? 0;
    });
    await this.pool.query(`SELECT pg_notify('${DELIVERIES_CHANNEL}', '')`);
    return requeued;
  }

  /**
   * Gives up the queued deliveries of an endpoint that was disabled or deleted, inside the caller's
   * transaction (after the endpoint's change): they stay `failed`, so that `recover` can re-send them
   * once it is enabled again. What would queue its deliveries again (a recording, `retry`, `recover`)
   * waits for the transaction to end.
   */
  async abandon(client: Queryable, webhookId: number, reason: string, now: Date): Promise<void> {
    await client.query(`SELECT pg_advisory_xact_lock(${endpointLockKey('$1::bigint')})`, [webhookId]);
    await client.query(
      `UPDATE webhooks.webhook_deliveries
          SET status = 'failed', next_attempt_at = NULL, last_error = $2, updated_at = $3, version = version + 1
        WHERE webhook_id = $1 AND status = 'pending'`,
      [webhookId, reason, now],
    );
  }

  /**
   * Gives each record's turn (for an endpoint) to its first queued delivery once no earlier one is open:
   * for the given (endpoint, record) pairs, or for every pair with deliveries waiting.
   *
   * Turns are passed after the transaction that finished a delivery commits, and again after the one
   * that queued a delivery behind an open one. Of two such transactions running at once, whichever
   * passes turns last sees the other's rows, so no delivery waits for a turn that was passed before it
   * existed. Only a process that dies between a commit and passing turns leaves one waiting: the
   * sweep over every pair, at start and now and then, is for those.
   */
  async passTurns(streams?: readonly { webhookId: number; streamId: string }[]): Promise<number> {
    // Two passes over overlapping rows (the intake's and a worker's) can deadlock; the statement is
    // idempotent, so the one Postgres picks as the victim simply runs again.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.passTurnsOnce(streams);
      } catch (error) {
        if ((error as { code?: string }).code !== DEADLOCK_DETECTED || attempt >= PASS_TURNS_ATTEMPTS)
          throw error;
      }
    }
  }

  private async passTurnsOnce(streams?: readonly { webhookId: number; streamId: string }[]): Promise<number> {
    const { rowCount } = await this.pool.query(
      prepared(
        `WITH pairs AS (
         SELECT DISTINCT webhook_id, stream_id FROM ${
           streams === undefined
             ? `webhooks.webhook_deliveries WHERE status = 'pending' AND NOT head`
             : `json_to_recordset($1::json) AS p(webhook_id bigint, stream_id text)`
         }
       ), first AS (
         SELECT f.* FROM pairs p CROSS JOIN LATERAL (
           SELECT w.id, w.webhook_id, w.stream_id, w.sequence FROM webhooks.webhook_deliveries w
            WHERE w.webhook_id = p.webhook_id AND w.stream_id = p.stream_id AND w.status = 'pending' AND NOT w.head
            ORDER BY w.sequence LIMIT 1) f
       )
       -- Rows are locked in id order: two passes over overlapping records (the intake's and a worker's)
       -- then wait for each other instead of deadlocking, which cost a second's wait to detect.
       UPDATE webhooks.webhook_deliveries d SET head = true
        WHERE d.id IN (
          SELECT w.id FROM webhooks.webhook_deliveries w JOIN first ON first.id = w.id
           WHERE w.status = 'pending' AND NOT w.head AND NOT EXISTS (${earlierOpen('first')})
           ORDER BY w.id
           FOR UPDATE OF w)`,
        streams === undefined
          ? []
          : [
              JSON.stringify(
                streams.map(({ webhookId, streamId }) => ({ webhook_id: webhookId, stream_id: streamId })),
              ),
            ],
      ),
    );
    if ((rowCount ?? 0) > 0) await this.pool.query(`SELECT pg_notify('${DELIVERIES_CHANNEL}', '')`);
    return rowCount ?? 0;
  }

  /** Workers other than `worker` that hold deliveries in flight. */
  async claimHolders(worker: number): Promise<number[]> {
    const { rows } = await this.pool.query<{ claimed_by: number }>(
      `SELECT DISTINCT claimed_by FROM webhooks.webhook_deliveries
        WHERE status = 'sending' AND claimed_by <> $1`,
      [worker],
    );
    return rows.map((row) => row.claimed_by);
  }

  /**
   * Queues again, due at once, deliveries claimed but not recorded: those of a worker that is gone (all
   * its claims, or the given ones it hands back) or whose claim lapsed. They go out with their
   * original `webhook-id`.
   */
  async release(claims: { worker: number; ids?: readonly number[] } | 'lapsed', now: Date): Promise<number> {
    const { rowCount } = await this.pool.query(
      `UPDATE webhooks.webhook_deliveries
          SET status = 'pending', claimed_by = NULL, lease_expires_at = NULL, next_attempt_at = $1,
              updated_at = $1, version = version + 1
        WHERE status = 'sending'
          AND CASE WHEN $2::int IS NULL THEN lease_expires_at < $1
                   ELSE claimed_by = $2::int AND ($3::bigint[] IS NULL OR id = ANY($3::bigint[])) END`,
      [now, claims === 'lapsed' ? null : claims.worker, claims === 'lapsed' ? null : (claims.ids ?? null)],
    );
    if ((rowCount ?? 0) > 0) await this.pool.query(`SELECT pg_notify('${DELIVERIES_CHANNEL}', '')`);
    return rowCount ?? 0;
  }

  /**
   * Deletes up to `limit` deliveries (their attempts with them) that finished before `before`, and
   * takes them off the organizations' counts. @returns how many.
   */
  async purgeFinished(before: Date, limit: number): Promise<number> {
    const { rows } = await this.pool.query<{ purged: number }>(
      `WITH gone AS (
         DELETE FROM webhooks.webhook_deliveries
          WHERE id IN (SELECT id FROM webhooks.webhook_deliveries
                        -- created_at <= updated_at: implied, and it lets the old rows be found by the
                        -- (org_id, created_at) index wherever the heap keeps them.
                        WHERE status IN ('succeeded', 'failed') AND updated_at < $1 AND created_at < $1
                        LIMIT $2)
         RETURNING org_id
       ), counted AS (
         UPDATE webhooks.record_counts c SET count = c.count - g.n
           FROM (SELECT org_id, count(*) AS n FROM gone GROUP BY org_id) g
          WHERE c.model = 'webhook_deliveries' AND c.org_id = g.org_id
       )
       SELECT count(*)::int AS purged FROM gone`,
      [before, limit],
    );
    return rows[0]?.purged ?? 0;
  }

  /**
   * Deliveries queued and in flight, and how long the oldest due one has waited past its due time
   * (0 when none is due), for the queue gauges.
   */
  async depth(now: Date): Promise<QueueDepth> {
    const { rows } = await this.pool.query<QueueDepth>(
      `SELECT count(*) FILTER (WHERE status = 'pending')::int AS pending,
              count(*) FILTER (WHERE status = 'sending')::int AS sending,
              coalesce(extract(epoch FROM $1::timestamptz - min(next_attempt_at)
                FILTER (WHERE status = 'pending' AND next_attempt_at <= $1)), 0)::float8 AS "oldestDueSeconds"
         FROM webhooks.webhook_deliveries WHERE status IN ('pending', 'sending')`,
      [now],
    );
    return rows[0] ?? { pending: 0, sending: 0, oldestDueSeconds: 0 };
  }
}

/** What the queue gauges show. */
export interface QueueDepth {
  readonly pending: number;
  readonly sending: number;
  readonly oldestDueSeconds: number;
}

/**
 * A new round of attempts, due at once (`$1` is now). The delivery may go ahead of its record's queue
 * mark; claims still hold it back while an earlier delivery of its record is open.
 */
const REQUEUE = `status = 'pending', head = true, round_attempts = 0, next_attempt_at = $1, updated_at = $1,
  version = version + 1`;

/**
 * An earlier delivery of the record of delivery `alias` to the same endpoint is still open: it must
 * wait (API.md §8, events of one record in `sequence` order per endpoint). `OFFSET 0` keeps it a probe
 * of the open-by-record index per row (Postgres does not turn such an `EXISTS` into a join): as an
 * anti-join, the planner, whose statistics lag behind the queue's churn, hashed every open delivery of
 * the endpoint to check a handful.
 */
function earlierOpen(alias: string): string {
  return `SELECT 1 FROM webhooks.webhook_deliveries e
   WHERE e.webhook_id = ${alias}.webhook_id AND e.stream_id = ${alias}.stream_id AND e.sequence < ${alias}.sequence
     AND e.status IN ('pending', 'sending')
   OFFSET 0`;
}

interface ClaimedRow {
  id: number;
  org_id: number;
  webhook_id: number;
  event_id: string;
  event_type: string;
  stream_id: string | null;
  payload: string;
  traceparent: string | null;
  round_attempts: number;
  url: string;
  secret: string;
  previous_secret: string | null;
}
