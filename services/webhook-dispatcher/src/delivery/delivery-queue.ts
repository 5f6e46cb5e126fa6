import type { Queryable } from '@ofp/models';
import { inTransaction, prepared, type Pool, type PoolClient, type SecretsKeyring } from '@ofp/runtime';
import { DELIVERY_FAILED_EVENT_TYPE, TEST_EVENT_TYPE } from '../models.js';
import type { AttemptRecord } from './attempt.js';
import { EndpointSecrets, type UnopenedSecret } from './endpoint-secrets.js';
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

/** An id written into a statement's text: an integer, or it throws. */
function integerLiteral(id: number): string {
  if (!Number.isSafeInteger(id)) throw new Error(`not an id: ${id}`);
  return String(id);
}

/** The lock of endpoint `id` (an SQL expression) in {@link ENDPOINT_LOCK_SPACE}. */
function endpointLockKey(id: string): string {
  return `${ENDPOINT_LOCK_SPACE}, (${id} % 2147483647)::int`;
}

/**
 * Separates the payloads of a batch in the one text parameter that carries them all (split again by
 * `string_to_array`): a JSON text never holds it raw (JSON escapes every control character), and a
 * text parameter is read as is, where a JSON or array parameter would be parsed character by character.
 */
const PAYLOAD_SEPARATOR = '\u001e';

/** An array element that a Postgres array literal writes without quotes. */
type Unquoted = number | boolean | Date | null;

/**
 * A Postgres array literal of numbers, booleans and timestamps (ISO 8601, UTC), none of which needs
 * quotes or escapes, for the columns of a batch of attempts or of deliveries to queue. pg writes an
 * array parameter element by element, each quoted and escaped (two regular expressions and three
 * strings), a date assembled from a dozen padded parts: 2.5 KB of the 28.6 KB the dispatcher allocated
 * per delivery in `npm run bench:webhooks` (`BENCH_HEAP_PROF_DIR`, docs/benchmarks.md).
 */
function unquotedArray(values: readonly Unquoted[]): string {
  return `{${values.map(unquotedElement).join(',')}}`;
}

function unquotedElement(value: Unquoted): string {
  return value === null ? 'NULL' : value instanceof Date ? value.toISOString() : String(value);
}

/**
 * The oldest due deliveries of an endpoint (`endpoint`, an SQL expression), up to `rows` of them, claims
 * that hold (`held`) among them; the scan stops once it has passed `free` deliveries that no claim holds.
 * A claim needs no more free ones than it may take, and the claims that hold, which claims take oldest
 * first, come before them: reading on to the endpoint's limit read rows for nothing (512 where 322 were
 * needed in a claim of docs/benchmarks.md's probe). The stop is the window's run
 * condition (a bound on a count that never decreases ends the window, and so the scan under it), which
 * Postgres only makes of a bound known before the scan: a statement's parameter, not a lateral column.
 */
function dueScan(endpoint: string, rows: string, free: string): string {
  return `SELECT * FROM (
            SELECT s.*, count(*) FILTER (WHERE NOT s.held)
                          OVER (ORDER BY s.due_at, s.delivery_id ROWS UNBOUNDED PRECEDING) AS passed
              FROM (SELECT q.ctid, q.delivery_id, q.webhook_id, q.due_at,
                           q.claimed_by IS NOT NULL AND q.claimed_until > $1 AS held
                      FROM webhooks.delivery_queue q
                     WHERE q.webhook_id = ${endpoint} AND q.due_at <= $1
                     ORDER BY q.due_at, q.delivery_id
                     LIMIT ${rows}) s) w
           WHERE w.passed <= ${free}`;
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
  /** The exact body that is signed and sent, the same on every attempt: a JSON text. */
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
  /**
   * The current secret, then the previous one while a rotation is in its grace period; or why they do
   * not open (a key missing from SECRETS_KEY_FILE, an altered value): that delivery is not sent.
   */
  readonly secrets: readonly string[] | UnopenedSecret;
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

/** A record's deliveries to one endpoint: the unit of per-record order. */
interface Lane {
  readonly webhookId: number;
  readonly streamId: string;
}

/**
 * The burst an endpoint's rate allows, in seconds of its rate (at least one delivery): claims take up
 * to a tenth of a second's deliveries at once, so that in any second an endpoint gets about its rate.
 */
const RATE_BURST_SECONDS = 0.1;

/** What a claim took, and what the endpoints' rates made it leave. */
export interface Claim {
  readonly deliveries: ClaimedDelivery[];
  /** Due deliveries put off because their endpoint's rate was spent. */
  readonly heldBack: number;
  /** When an endpoint whose rate this claim spent has a token again; undefined when none. */
  readonly nextTokenAt: Date | undefined;
}

/** SQLSTATE 40P01. */
const DEADLOCK_DETECTED = '40P01';
const PASS_TURNS_ATTEMPTS = 5;

/**
 * What a caller commits with a change of the queue, given its result, in the change's transaction:
 * the checks that decide whether the request that asked for it succeeded, and the response to its
 * Idempotency-Key (API.md §5). It throws to undo the change.
 */
export type CommitWith<T> = (client: PoolClient, result: T) => Promise<void>;

/**
 * The durable delivery queue: each delivery's searchable record in `webhooks.webhook_deliveries`,
 * written when it is queued and when each attempt is recorded (a HOT update: nothing it changes is
 * indexed), and while it is open a narrow row in `webhooks.delivery_queue` that holds its turn, its
 * claim and its place in the retry schedule (migration 003).
 *
 * Per-record order: of a record's open deliveries to an endpoint, only the first has its turn (a due
 * time); the others wait (no due time) until it finishes and passes the turn on. Claims only walk
 * deliveries whose turn it is.
 *
 * Every step is one statement or one short transaction, so no transaction stays open while a request
 * is on the wire: an open transaction holding a transaction id would hold back every event-store reader
 * (they read up to the oldest transaction in flight).
 */
export class DeliveryQueue {
  private readonly secrets: EndpointSecrets;

  /** `secrets` opens the endpoints' sealed signing secrets (API.md §12). */
  constructor(
    private readonly pool: Pool,
    secrets: SecretsKeyring,
  ) {
    this.secrets = new EndpointSecrets(secrets);
  }

  /**
   * Queues deliveries for endpoints that still exist (and are enabled, unless `includeDisabled`), once
   * per (endpoint, event): a repeated event changes nothing. Returns the new deliveries' ids.
   * `commitWith` (given them) commits with them, in one transaction.
   */
  async enqueue(
    deliveries: readonly NewDelivery[],
    now: Date,
    options: { includeDisabled: boolean; commitWith?: CommitWith<number[]> } = { includeDisabled: false },
  ): Promise<number[]> {
    if (deliveries.length === 0) return [];
    for (const { payload } of deliveries) {
      if (payload.includes(PAYLOAD_SEPARATOR)) throw new Error('a delivery payload must be a JSON text');
    }
    const { commitWith } = options;
    const { rows } = commitWith
      ? await inTransaction(this.pool, async (client) => {
          const inserted = await this.insert(client, deliveries, now, options.includeDisabled);
          await commitWith(
            client,
            inserted.rows.map((row) => row.id),
          );
          return inserted;
        })
      : await this.insert(this.pool, deliveries, now, options.includeDisabled);
    // Queued behind an open delivery of their record: if that one finished meanwhile, its turn-passing
    // could not see these yet; now it is this side's to pass (see `passTurns`).
    const waiting = rows.flatMap(({ webhook_id: webhookId, stream_id: streamId, waiting }) =>
      waiting && streamId !== null ? [{ webhookId, streamId }] : [],
    );
    if (waiting.length > 0) await this.passTurns(now, waiting);
    return rows.map((row) => row.id);
  }

  /** The statement of {@link enqueue}. */
  private insert(db: Queryable, deliveries: readonly NewDelivery[], now: Date, includeDisabled: boolean) {
    return db.query<{
      id: number;
      webhook_id: number;
      stream_id: string | null;
      waiting: boolean;
    }>(
      prepared(
        `WITH given AS (
         SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::int[], $7::text[],
                              string_to_array($8, chr(30)))
           WITH ORDINALITY AS g(org_id, webhook_id, event_id, event_type, stream_id, sequence, traceparent, payload, n)
       ), inserted AS (
         INSERT INTO webhooks.webhook_deliveries AS d (org_id, webhook_id, event_id, event_type, stream_id,
           sequence, payload, traceparent, status, attempts, next_attempt_at, created_at, updated_at, version)
         SELECT g.org_id, g.webhook_id, g.event_id, g.event_type, g.stream_id, g.sequence, g.payload, g.traceparent,
                'pending', 0, $9, $9, $9, 1
           FROM given g
           JOIN webhooks.webhooks w ON w.id = g.webhook_id AND w.org_id = g.org_id AND (w.enabled OR $10)
          ORDER BY g.n
         ON CONFLICT (event_id, webhook_id) DO NOTHING
         RETURNING d.id, d.org_id, d.webhook_id, d.stream_id, d.sequence
       ), queued AS (
         -- Its record's turn if no earlier delivery of the record to the endpoint is open: none in the
         -- queue, none before it in this batch. (The bus hands one record's events over in order.)
         INSERT INTO webhooks.delivery_queue (delivery_id, webhook_id, stream_id, sequence, due_at)
         SELECT i.id, i.webhook_id, i.stream_id, i.sequence,
                CASE WHEN i.stream_id IS NULL
                       OR i.place = 1 AND NOT EXISTS (SELECT 1 FROM webhooks.delivery_queue e
                                                       WHERE e.webhook_id = i.webhook_id AND e.stream_id = i.stream_id)
                     THEN $9::timestamptz END
           FROM (SELECT inserted.*,
                        row_number() OVER (PARTITION BY webhook_id, stream_id ORDER BY sequence, id) AS place
                   FROM inserted) i
         RETURNING delivery_id, webhook_id, stream_id, due_at
       ), counted AS (
         INSERT INTO webhooks.record_counts AS c (model, org_id, count)
         SELECT 'webhook_deliveries', org_id, count(*) FROM inserted GROUP BY org_id ORDER BY org_id
         ON CONFLICT (model, org_id) DO UPDATE SET count = c.count + EXCLUDED.count
       ), woken AS (
         -- Deliveries due now wake the idle workers of every process, told when this commits: no
         -- statement of its own after it.
         SELECT pg_notify('${DELIVERIES_CHANNEL}', '') FROM queued WHERE due_at IS NOT NULL LIMIT 1
       )
       SELECT q.delivery_id AS id, q.webhook_id, q.stream_id, q.due_at IS NULL AS waiting
         FROM queued q, (SELECT count(*) FROM woken) wake
        ORDER BY q.delivery_id`,
        [
          unquotedArray(deliveries.map((d) => d.orgId)),
          unquotedArray(deliveries.map((d) => d.webhookId)),
          deliveries.map((d) => d.eventId),
          deliveries.map((d) => d.eventType),
          deliveries.map((d) => d.streamId),
          unquotedArray(deliveries.map((d) => d.sequence)),
          deliveries.map((d) => d.traceparent ?? null),
          deliveries.map((d) => d.payload).join(PAYLOAD_SEPARATOR),
          now,
          includeDisabled,
        ],
      ),
    );
  }

  /**
   * Claims due deliveries for a worker: oldest due first of what each endpoint may take, so that an
   * endpoint at its limit, however long its backlog, holds no other back; only deliveries whose
   * record's turn it is (API.md §8: in `sequence` order per endpoint), no more per endpoint than its
   * concurrency limit allows, and no faster than its rate (`rate_limit`, a token bucket in `webhooks.endpoint_rates`
   * that claims, serialized, share across processes). What a rate holds back is put off to when its
   * tokens come. A claim holds until the worker records the attempt, hands it back, dies, or `leaseMs`
   * passes.
   */
  async claim(options: ClaimOptions, now: Date): Promise<Claim> {
    const client = await this.pool.connect();
    try {
      // The queue's statistics lag behind its churn, and a plan that reads every due row to sort them
      // costs a claim milliseconds per thousand rows queued: walk the due index in order instead.
      await client.query(
        `BEGIN; SET LOCAL enable_bitmapscan = off; SELECT pg_advisory_xact_lock(${CLAIM_LOCK})`,
      );
      const { rows } = await client.query<ClaimRow>(
        prepared(
          `WITH RECURSIVE queued AS (
           -- The endpoints with deliveries queued, one index descent each (a skip scan): each endpoint's
           -- due deliveries are looked at apart, so that one whose slots are taken holds no other back
           -- however long its backlog.
           (SELECT q.webhook_id FROM webhooks.delivery_queue q
             WHERE q.due_at IS NOT NULL ORDER BY q.webhook_id LIMIT 1)
           UNION ALL
           SELECT (SELECT q.webhook_id FROM webhooks.delivery_queue q
                    WHERE q.due_at IS NOT NULL AND q.webhook_id > e.webhook_id ORDER BY q.webhook_id LIMIT 1)
             FROM queued e WHERE e.webhook_id IS NOT NULL
         ), rated AS (
           -- The queued endpoints that have a rate, each a token bucket (GCRA): one token every
           -- \`spacing\` ms, at most \`burst\` at once; \`tat\` is when it would be full again.
           SELECT w.id AS webhook_id, 1000 / w.rate_limit::float8 AS spacing,
                  ceil(w.rate_limit * ${RATE_BURST_SECONDS})::int AS burst, greatest(t.tat, $1) AS tat,
                  t.held_until
             FROM webhooks.webhooks w LEFT JOIN webhooks.endpoint_rates t ON t.webhook_id = w.id
            WHERE w.id IN (SELECT webhook_id FROM queued) AND w.rate_limit IS NOT NULL
         ), allowed AS (
           -- The tokens in each bucket now (the epsilon: the microseconds a timestamp rounds away).
           SELECT rated.*,
                  greatest(0, burst + floor(extract(epoch FROM $1 - tat) * 1000 / spacing + 1e-6))::int AS tokens
             FROM rated
         ), due AS (
           -- Each endpoint's oldest due deliveries, claimed ones among them (a claim leaves the due time
           -- alone): as many as its limit, so that they hold its claims (claims take the oldest first,
           -- and a delivery queued again after a claim is due after it) and its free slots, up to as many
           -- free ones as this claim could take; and when it has a rate, up to $2 more, those beyond its
           -- tokens to be put off below.
           SELECT f.ctid, f.delivery_id, f.webhook_id, f.due_at, f.held FROM queued e
             LEFT JOIN allowed a ON a.webhook_id = e.webhook_id
            CROSS JOIN LATERAL (${dueScan('e.webhook_id', '$3', '$4')}) f
            WHERE e.webhook_id IS NOT NULL AND a.webhook_id IS NULL
           UNION ALL
           SELECT f.ctid, f.delivery_id, f.webhook_id, f.due_at, f.held FROM allowed a
            CROSS JOIN LATERAL (${dueScan('a.webhook_id', '$3 + $2', '$2')}) f
         ), busy AS (
           -- Claims that hold (a lapsed one is due again).
           SELECT due.webhook_id, count(*)::int AS claimed FROM due WHERE due.held GROUP BY due.webhook_id
         ), ranked AS (
           SELECT due.*, row_number() OVER (PARTITION BY due.webhook_id ORDER BY due.due_at, due.delivery_id) AS place
             FROM due WHERE NOT due.held
         ), chosen AS (
           SELECT r.delivery_id, r.ctid FROM ranked r
             LEFT JOIN busy b ON b.webhook_id = r.webhook_id
             LEFT JOIN allowed a ON a.webhook_id = r.webhook_id
            WHERE r.place + coalesce(b.claimed, 0) <= $3 AND (a.tokens IS NULL OR r.place <= a.tokens)
            ORDER BY r.due_at, r.delivery_id
            LIMIT $4
         ), held AS (
           -- Due beyond their endpoint's tokens: put off, one spacing apart, to when its bucket has a
           -- token for each (once its tokens are spent, after those put off before), so that they leave
           -- the front of the queue to other endpoints' deliveries, each written once. (A lapsed claim
           -- stays due.) Each record keeps its turn: order is untouched.
           SELECT q.delivery_id, a.webhook_id,
                  greatest(a.tat + ((a.tokens - a.burst + 1) * a.spacing) * interval '1 millisecond',
                           a.held_until + a.spacing * interval '1 millisecond')
                    + ((r.place - a.tokens - 1) * a.spacing) * interval '1 millisecond' AS due_at
             FROM ranked r JOIN allowed a ON a.webhook_id = r.webhook_id
             JOIN webhooks.delivery_queue q ON q.delivery_id = r.delivery_id
            WHERE r.place > a.tokens AND r.place <= $2 AND q.claimed_by IS NULL AND q.due_at <= $1
              FOR UPDATE OF q SKIP LOCKED
         ), deferred AS (
           -- Found by key: joined to \`held\` alone, the plan read the queue from its first page for its
           -- first row, through every dead row a vacuum had not taken yet, though no endpoint has a rate.
           UPDATE webhooks.delivery_queue q SET due_at = h.due_at
             FROM held h
            WHERE q.delivery_id = ANY ((SELECT array_agg(delivery_id) FROM held)::bigint[])
              AND q.delivery_id = h.delivery_id
           RETURNING q.delivery_id
         ), locked AS (
           -- Only the rows taken are locked, each found where the scan saw it (a TID scan, no descent of
           -- the primary key). One that another transaction changed since the scan is no longer there
           -- (Postgres checks a TID scan's row again at the place of its newest version): it is skipped
           -- and stays due for the next claim.
           SELECT q.ctid FROM webhooks.delivery_queue q
            WHERE q.ctid = ANY ((SELECT array_agg(ctid) FROM chosen)::tid[]) AND q.due_at <= $1
              AND (q.claimed_by IS NULL OR q.claimed_until <= $1)
            FOR UPDATE SKIP LOCKED
         ), claimed AS (
           -- Heap-only: neither column is indexed (migration 010). Found where they were locked: what
           -- was locked has not changed since. (Their places come from \`locked\` itself: joined to
           -- \`chosen\` by id, both estimated at one row, the plan compared every pair, 16,384 for a
           -- claim of 128, about 2 ms of Postgres's CPU per claim.)
           UPDATE webhooks.delivery_queue q SET claimed_by = $5, claimed_until = $6
            WHERE q.ctid = ANY ((SELECT array_agg(ctid) FROM locked)::tid[])
           RETURNING q.delivery_id, q.webhook_id, q.round_attempts
         ), spent AS (
           -- Each token taken moves its bucket's time on by one spacing.
           SELECT a.webhook_id, a.burst, a.spacing, count(c.delivery_id) AS taken,
                  a.tat + (count(c.delivery_id) * a.spacing) * interval '1 millisecond' AS tat
             FROM allowed a LEFT JOIN claimed c ON c.webhook_id = a.webhook_id
            GROUP BY a.webhook_id, a.burst, a.spacing, a.tat
         ), kept AS (
           INSERT INTO webhooks.endpoint_rates AS t (webhook_id, tat, held_until)
           SELECT s.webhook_id, s.tat, h.until
             FROM spent s LEFT JOIN (SELECT webhook_id, max(due_at) AS until FROM held GROUP BY webhook_id) h
               ON h.webhook_id = s.webhook_id
            WHERE s.taken > 0 OR h.until IS NOT NULL
            ORDER BY s.webhook_id
           ON CONFLICT (webhook_id) DO UPDATE
             SET tat = excluded.tat, held_until = coalesce(excluded.held_until, t.held_until)
         )
         -- One row even when nothing was claimed: what the rates held back, and when the first of
         -- the buckets this claim emptied has a token again (the claiming worker looks again then:
         -- the deliveries held back fall due one by one as their tokens come).
         SELECT h.held_back, h.next_token_at, x.*
           FROM (SELECT (SELECT count(*)::int FROM deferred) AS held_back,
                        (SELECT min(n.at) FROM (SELECT tat - ((burst - 1) * spacing) * interval '1 millisecond' AS at
                                                  FROM spent WHERE webhook_id IN (SELECT webhook_id FROM due)) n
                          WHERE n.at > $1) AS next_token_at) h
           LEFT JOIN (
             SELECT c.delivery_id AS id, d.org_id, c.webhook_id, d.event_id, d.event_type, d.stream_id, d.payload,
                    d.traceparent, c.round_attempts, w.url, s.secret,
                    CASE WHEN s.previous_secret_expires_at > $1 THEN s.previous_secret END AS previous_secret
               FROM claimed c
               JOIN webhooks.webhook_deliveries d ON d.id = c.delivery_id
               JOIN webhooks.webhooks w ON w.id = c.webhook_id
               JOIN webhooks.endpoints s ON s.webhook_id = c.webhook_id
           ) x ON true
          ORDER BY x.id`,
          [
            now,
            // What a rated endpoint's claim looks at: those beyond its tokens are put off, a claim's worth
            // and more, so that they are not read again at every claim.
            options.limit * 2,
            options.endpointConcurrency,
            options.limit,
            options.worker,
            new Date(now.getTime() + options.leaseMs),
          ],
        ),
      );
      await client.query('COMMIT');
      const deliveries: ClaimedDelivery[] = [];
      for (const row of rows) {
        if (row.id === null) continue;
        deliveries.push({
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
          secrets: this.secrets.open(row.webhook_id, row.secret, row.previous_secret),
        });
      }
      const [first] = rows;
      return {
        deliveries,
        heldBack: first?.held_back ?? 0,
        nextTokenAt: first?.next_token_at ?? undefined,
      };
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.release();
    }
  }

  /**
   * Records finished attempts in one statement: each delivery's record and its attempt-log row, its
   * queue row (gone once the delivery is finished, due again at its retry), each endpoint's health, and
   * the turn of each record whose delivery finished, given to its next delivery; a record whose next
   * delivery the statement does not see has its turn passed after the commit (see `passTurns`). An
   * attempt whose claim was taken back meanwhile (its worker was presumed dead, or its claim lapsed) is
   * not recorded: that delivery is queued again and will be sent again, with the same id.
   *
   * A delivery given up (its last attempt failed, or its endpoint was disabled meanwhile) is noted in
   * `webhooks.delivery_failures` by the same statement, for the FailureAnnouncer to tell.
   *
   * @returns the endpoints that now have to be disabled (API.md §8: a 410, or 5 days of failures), and
   * how many deliveries were given up.
   */
  async complete(
    finished: readonly FinishedAttempt[],
    now: Date,
    failingPeriodMs: number,
  ): Promise<{ toDisable: number[]; givenUp: number }> {
    if (finished.length === 0) return { toDisable: [], givenUp: 0 };
    const endpoints = [...new Set(finished.map(({ delivery }) => delivery.webhookId))].sort((a, b) => a - b);
    const column = <T>(value: (attempt: FinishedAttempt) => T): T[] => finished.map(value);
    const literal = (value: (attempt: FinishedAttempt) => Unquoted): string =>
      unquotedArray(finished.map(value));
    // The endpoints' locks are taken before the statement, whose snapshot then sees a disable that
    // committed while it waited; sent with BEGIN, in one round trip (a simple query: ids written out).
    const locked = `SELECT pg_advisory_xact_lock_shared(${endpointLockKey('id')})
                      FROM unnest(ARRAY[${endpoints.map(integerLiteral).join(', ')}]::bigint[]) AS id`;
    const { rows } = await inTransaction(
      this.pool,
      (client) =>
        client.query<{
          webhook_id: number | null;
          disable_reason: string | null;
          given_up: number;
          unseen: Lane[] | null;
        }>(
          prepared(
            `WITH result AS (
         -- One attempt per claim. The same delivery may come twice, under two claims: a worker whose
         -- session was lost takes a new key, and the claims of its old one are queued again and may be
         -- claimed again, by this process too, while their first attempt still waits to be recorded.
         -- Only the attempt of the claim that holds is recorded (see claimant below).
         SELECT DISTINCT ON (r.id, r.claimed_by) r.*,
                -- A retry goes on while the endpoint is enabled (tests are sent to disabled ones too). One
                -- disabled (or deleted) while the attempt was under way gave up its queue then, but not
                -- this delivery: its retry is given up now.
                r.status = 'pending' AND (r.event_type = '${TEST_EVENT_TYPE}' OR coalesce(
                  (SELECT w.enabled FROM webhooks.webhooks w WHERE w.id = r.webhook_id), false)) AS retried
           FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::text[], $5::text[], $6::timestamptz[],
                       $7::timestamptz[], $8::int[], $9::int[], $10::text[], $11::text[], $12::text[], $13::boolean[])
             AS r(id, webhook_id, claimed_by, event_type, status, next_attempt_at, started_at, duration_ms,
                  status_code, error_kind, error, response_excerpt, gone)
          ORDER BY r.id, r.claimed_by, r.started_at DESC
       ), left_queue AS (
         DELETE FROM webhooks.delivery_queue q USING result r
          WHERE q.delivery_id = r.id AND q.claimed_by = r.claimed_by AND NOT r.retried
         RETURNING q.delivery_id, q.webhook_id, q.stream_id, r.claimed_by AS claimant
       ), lanes AS (
         -- The records whose delivery finished, and each one's next open delivery at the endpoint that
         -- this statement sees (none: one being queued may not be visible yet).
         SELECT l.webhook_id, l.stream_id, n.delivery_id, n.due_at
           FROM (SELECT DISTINCT webhook_id, stream_id FROM left_queue WHERE stream_id IS NOT NULL) l
           LEFT JOIN LATERAL (
             SELECT q.delivery_id, q.due_at FROM webhooks.delivery_queue q
              WHERE q.webhook_id = l.webhook_id AND q.stream_id = l.stream_id
                AND q.delivery_id NOT IN (SELECT delivery_id FROM left_queue)
              ORDER BY q.sequence LIMIT 1) n ON true
       ), turned AS (
         -- The turn passed to it, in this statement: found by key, in key order (as passTurns locks).
         UPDATE webhooks.delivery_queue q SET due_at = $14
          WHERE q.delivery_id = ANY ((SELECT array_agg(delivery_id) FROM lanes WHERE due_at IS NULL)::bigint[])
            AND q.due_at IS NULL
       ), retried AS (
         UPDATE webhooks.delivery_queue q
            SET due_at = r.next_attempt_at, claimed_by = NULL, claimed_until = NULL, round_attempts = q.round_attempts + 1
           FROM result r
          WHERE q.delivery_id = r.id AND q.claimed_by = r.claimed_by AND r.retried
         RETURNING q.delivery_id, r.claimed_by AS claimant
       ), settled AS (
         -- Each delivery whose claim held, with that claim's worker: its attempt is the one recorded.
         SELECT delivery_id, claimant FROM left_queue UNION ALL SELECT delivery_id, claimant FROM retried
       ), recorded AS (
         UPDATE webhooks.webhook_deliveries d
            SET status = CASE WHEN r.retried THEN 'pending' WHEN r.status = 'pending' THEN 'failed' ELSE r.status END,
                attempts = d.attempts + 1,
                next_attempt_at = CASE WHEN r.retried THEN r.next_attempt_at END,
                last_status_code = r.status_code, last_error = r.error, updated_at = $14, version = d.version + 1
           FROM result r JOIN settled s ON s.delivery_id = r.id AND s.claimant = r.claimed_by
          WHERE d.id = r.id
         RETURNING d.id, d.org_id, d.webhook_id, d.attempts, r.claimed_by AS claimant
       ), logged AS (
         INSERT INTO webhooks.webhook_deliveries__attempt_log
           (org_id, record_id, ordinal, started_at, duration_ms, status_code, error_kind, error, response_excerpt)
         SELECT u.org_id, u.id, u.attempts - 1, r.started_at, r.duration_ms, r.status_code, r.error_kind, r.error,
                r.response_excerpt
           FROM recorded u JOIN result r ON r.id = u.id AND r.claimed_by = u.claimant
       ), health AS (
         -- A success anywhere in the batch ends the endpoint's run of failures.
         SELECT u.webhook_id, bool_or(r.status = 'succeeded') AS succeeded, bool_or(r.gone) AS gone,
                min(r.started_at) FILTER (WHERE r.status <> 'succeeded') AS first_failure
           FROM recorded u JOIN result r ON r.id = u.id AND r.claimed_by = u.claimant
          GROUP BY u.webhook_id
       ), touched AS (
         UPDATE webhooks.endpoints s
            SET failing_since = CASE WHEN h.succeeded THEN NULL ELSE coalesce(s.failing_since, h.first_failure) END,
                disable_reason = coalesce(s.disable_reason, CASE
                  WHEN h.gone THEN 'gone'
                  WHEN NOT h.succeeded
                   AND coalesce(s.failing_since, h.first_failure) <= $14 - $15 * interval '1 millisecond' THEN 'failing'
                END)
           FROM health h
          WHERE s.webhook_id = h.webhook_id
            -- Only what changes: a healthy endpoint's row is not written again with every batch.
            AND (s.failing_since IS NOT NULL OR NOT h.succeeded OR h.gone)
         RETURNING s.webhook_id, s.disable_reason
       ), given_up AS (
         -- Deliveries given up after this attempt, to be told to the organization's other endpoints
         -- (webhook.delivery_failed): not a test, sent to that endpoint alone, nor such a notice itself.
         INSERT INTO webhooks.delivery_failures (delivery_id, failed_at)
         SELECT u.id, $14 FROM recorded u JOIN result r ON r.id = u.id AND r.claimed_by = u.claimant
          WHERE NOT r.retried AND r.status <> 'succeeded'
            AND r.event_type NOT IN ('${TEST_EVENT_TYPE}', '${DELIVERY_FAILED_EVENT_TYPE}')
         ON CONFLICT (delivery_id) DO NOTHING
         RETURNING delivery_id
       )
       -- Finished deliveries free endpoint slots, and turns passed make deliveries due: wake every worker.
       SELECT t.webhook_id, t.disable_reason, (SELECT count(*)::int FROM given_up) AS given_up,
              (SELECT json_agg(json_build_object('webhookId', webhook_id, 'streamId', stream_id))
                 FROM lanes WHERE delivery_id IS NULL) AS unseen
         FROM (SELECT pg_notify('${DELIVERIES_CHANNEL}', '')) wake
         LEFT JOIN touched t ON t.disable_reason IS NOT NULL`,
            [
              literal(({ delivery }) => delivery.id),
              literal(({ delivery }) => delivery.webhookId),
              literal(({ delivery }) => delivery.claimedBy),
              column(({ delivery }) => delivery.eventType),
              column(({ verdict }) => verdict.status),
              literal(({ verdict }) => (verdict.status === 'pending' ? verdict.nextAttemptAt : null)),
              literal(({ attempt }) => attempt.startedAt),
              literal(({ attempt }) => attempt.durationMs),
              literal(({ attempt }) => attempt.statusCode),
              column(({ attempt }) => attempt.errorKind),
              column(({ attempt }) => attempt.error),
              column(({ attempt }) => attempt.responseExcerpt),
              literal(({ verdict }) => verdict.status === 'failed' && verdict.disableEndpoint),
              now,
              failingPeriodMs,
            ],
          ),
        ),
      { first: locked },
    );
    // A record whose next delivery the statement did not see: one queued meanwhile may need the turn.
    const unseen = rows[0]?.unseen ?? [];
    if (unseen.length > 0) await this.passTurns(now, unseen);
    return {
      toDisable: rows.flatMap(({ webhook_id: id }) => (id === null ? [] : [id])),
      givenUp: rows[0]?.given_up ?? 0,
    };
  }

  /**
   * Queues a finished delivery again for a new round of attempts (`POST /v2/webhook_deliveries/{id}/retry`).
   * @returns false when the delivery is not finished (or not the organization's), or its endpoint is
   * disabled. `commitWith` (given how many: 1 or 0) commits with it.
   */
  async retry(
    orgId: number,
    deliveryId: number,
    now: Date,
    commitWith?: CommitWith<number>,
  ): Promise<boolean> {
    const requeued = await this.requeue(
      `d.id = $2 AND d.org_id = $3 AND d.status IN ('succeeded', 'failed')`,
      [now, deliveryId, orgId],
      {
        sql: 'SELECT webhook_id AS id FROM webhooks.webhook_deliveries WHERE id = $1 AND org_id = $2',
        values: [deliveryId, orgId],
      },
      commitWith,
    );
    return requeued === 1;
  }

  /**
   * Queues again every given-up delivery of an endpoint queued since `since` (`POST /v2/webhooks/{id}/recover`).
   * @returns how many (none when the endpoint is disabled); `commitWith` (given how many) commits with them.
   */
  async recover(
    orgId: number,
    webhookId: number,
    since: Date,
    now: Date,
    commitWith?: CommitWith<number>,
  ): Promise<number> {
    return this.requeue(
      `d.webhook_id = $2 AND d.org_id = $3 AND d.status = 'failed' AND d.created_at >= $4`,
      [now, webhookId, orgId, since],
      { sql: 'SELECT $1::bigint AS id', values: [webhookId] },
      commitWith,
    );
  }

  /**
   * Queues again, due at once (`$1` is now), the finished deliveries `condition` selects (of records
   * `d`) while their endpoint (`endpoint` selects its id) is enabled: under the endpoint's lock held
   * shared, as recordings do, so that a disable gives up what this queued, or this sees the disable.
   * A delivery queued again has its record's turn unless an earlier delivery of the record is open;
   * the record's later deliveries that were due wait for it (those on the wire finish). `commitWith`
   * (given how many) commits with them.
   */
  private async requeue(
    condition: string,
    values: unknown[],
    endpoint: { sql: string; values: unknown[] },
    commitWith?: CommitWith<number>,
  ): Promise<number> {
    const requeued = await inTransaction(this.pool, async (client) => {
      await client.query(
        `SELECT pg_advisory_xact_lock_shared(${endpointLockKey('e.id')}) FROM (${endpoint.sql}) e`,
        endpoint.values,
      );
      const { rows } = await client.query<{ requeued: number }>(
        `WITH chosen AS (
           SELECT d.id, d.webhook_id, d.stream_id, d.sequence,
                  row_number() OVER (PARTITION BY d.webhook_id, d.stream_id ORDER BY d.sequence, d.id) AS place
             FROM webhooks.webhook_deliveries d
            WHERE ${condition}
              AND (SELECT w.enabled FROM webhooks.webhooks w WHERE w.id = d.webhook_id AND w.org_id = d.org_id)
         ), queued AS (
           INSERT INTO webhooks.delivery_queue (delivery_id, webhook_id, stream_id, sequence, due_at)
           SELECT c.id, c.webhook_id, c.stream_id, c.sequence,
                  CASE WHEN c.stream_id IS NULL
                         OR c.place = 1 AND NOT EXISTS (SELECT 1 FROM webhooks.delivery_queue e
                                                         WHERE e.webhook_id = c.webhook_id AND e.stream_id = c.stream_id
                                                           AND e.sequence < c.sequence)
                       THEN $1::timestamptz END
             FROM chosen c
           -- Already queued again by a request racing this one.
           ON CONFLICT (delivery_id) DO NOTHING
           RETURNING delivery_id, webhook_id, stream_id, sequence, due_at
         ), behind AS (
           UPDATE webhooks.delivery_queue q SET due_at = NULL
             FROM queued n
            WHERE n.stream_id IS NOT NULL AND q.webhook_id = n.webhook_id AND q.stream_id = n.stream_id
              AND q.sequence > n.sequence AND q.claimed_by IS NULL AND q.due_at IS NOT NULL
         ), reopened AS (
           UPDATE webhooks.webhook_deliveries d
              SET status = 'pending', next_attempt_at = $1, updated_at = $1, version = d.version + 1
             FROM queued n WHERE d.id = n.delivery_id
         )
         SELECT count(*)::int AS requeued FROM queued`,
        values,
      );
      const count = rows[0]?.requeued ?? 0;
      await commitWith?.(client, count);
      return count;
    });
    if (requeued > 0) await this.wake();
    return requeued;
  }

  /**
   * Gives up the queued deliveries of an endpoint that was disabled or deleted, inside the caller's
   * transaction (after the endpoint's change): they stay `failed`, so that `recover` can re-send them
   * once it is enabled again. What is on the wire is given up when its attempt is recorded. What would
   * queue its deliveries again (a recording, `retry`, `recover`) waits for the transaction to end.
   */
  async abandon(client: Queryable, webhookId: number, reason: string, now: Date): Promise<void> {
    await client.query(`SELECT pg_advisory_xact_lock(${endpointLockKey('$1::bigint')})`, [webhookId]);
    await client.query(
      `WITH gone AS (
         DELETE FROM webhooks.delivery_queue
          WHERE webhook_id = $1 AND (claimed_by IS NULL OR claimed_until <= $3)
         RETURNING delivery_id
       )
       UPDATE webhooks.webhook_deliveries d
          SET status = 'failed', next_attempt_at = NULL, last_error = $2, updated_at = $3, version = d.version + 1
         FROM gone WHERE d.id = gone.delivery_id`,
      [webhookId, reason, now],
    );
  }

  /**
   * After a change of an endpoint's rate, inside the caller's transaction: what the old rate put off
   * is due again when it was before (the record's `next_attempt_at`, which putting off leaves alone;
   * a delivery's queue row is never due before it), for the next claims to space at the new rate.
   */
  async respace(client: Queryable, webhookId: number): Promise<void> {
    await client.query(
      `WITH reset AS (UPDATE webhooks.endpoint_rates SET held_until = NULL WHERE webhook_id = $1)
       UPDATE webhooks.delivery_queue q SET due_at = d.next_attempt_at
         FROM webhooks.webhook_deliveries d
        WHERE q.webhook_id = $1 AND q.claimed_by IS NULL AND d.id = q.delivery_id
          AND q.due_at > d.next_attempt_at`,
      [webhookId],
    );
  }

  /**
   * Gives each record's turn (at an endpoint) to its first open delivery when that one is waiting: for
   * the given lanes, or for every lane with deliveries waiting.
   *
   * The statement that finishes a delivery passes its record's turn to the next delivery it sees;
   * seeing none, turns are passed after its transaction commits, and again after the one that queued
   * a delivery behind an open one. Of two such transactions running at once, whichever passes turns
   * last sees the other's rows, so no delivery waits for a turn that was passed before it existed.
   * Only a process that dies between a commit and passing turns leaves one waiting: the sweep over
   * every lane, at start and now and then, is for those.
   */
  async passTurns(now: Date, lanes?: readonly Lane[]): Promise<number> {
    // Two passes over overlapping rows (the intake's and a worker's) can deadlock; the statement is
    // idempotent, so the one Postgres picks as the victim simply runs again.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.passTurnsOnce(now, lanes);
      } catch (error) {
        if ((error as { code?: string }).code !== DEADLOCK_DETECTED || attempt >= PASS_TURNS_ATTEMPTS)
          throw error;
      }
    }
  }

  private async passTurnsOnce(now: Date, lanes?: readonly Lane[]): Promise<number> {
    const { rowCount } = await this.pool.query(
      prepared(
        `WITH lanes AS (
         SELECT DISTINCT webhook_id, stream_id FROM ${
           lanes === undefined
             ? `webhooks.delivery_queue WHERE due_at IS NULL AND stream_id IS NOT NULL`
             : `unnest($2::bigint[], $3::text[]) AS p(webhook_id, stream_id)`
         }
       ), first AS (
         SELECT f.delivery_id FROM lanes l CROSS JOIN LATERAL (
           SELECT q.delivery_id, q.due_at FROM webhooks.delivery_queue q
            WHERE q.webhook_id = l.webhook_id AND q.stream_id = l.stream_id
            ORDER BY q.sequence LIMIT 1) f
          WHERE f.due_at IS NULL
       )
       -- Rows are locked in id order: two passes over overlapping records (the intake's and a worker's)
       -- then wait for each other instead of deadlocking, which cost a second's wait to detect.
       UPDATE webhooks.delivery_queue q SET due_at = $1
        WHERE q.delivery_id IN (
          SELECT w.delivery_id FROM webhooks.delivery_queue w JOIN first ON first.delivery_id = w.delivery_id
           WHERE w.due_at IS NULL
           ORDER BY w.delivery_id
           FOR UPDATE OF w)`,
        lanes === undefined
          ? [now]
          : [now, lanes.map((lane) => lane.webhookId), lanes.map((lane) => lane.streamId)],
      ),
    );
    if ((rowCount ?? 0) > 0) await this.wake();
    return rowCount ?? 0;
  }

  /** Workers other than `worker` that hold claims. */
  async claimHolders(worker: number): Promise<number[]> {
    const { rows } = await this.pool.query<{ claimed_by: number }>(
      `SELECT DISTINCT claimed_by FROM webhooks.delivery_queue
        WHERE claimed_by IS NOT NULL AND claimed_by <> $1`,
      [worker],
    );
    return rows.map((row) => row.claimed_by);
  }

  /**
   * Queues again, due at once, deliveries claimed but not recorded by a worker that is gone (all its
   * claims) or that hands them back (the given ones). They go out with their original `webhook-id`.
   * Due now, not at their first due time: after the claims that hold, which claims count in due order.
   */
  async release(claims: { worker: number; ids?: readonly number[] }, now: Date): Promise<number> {
    const { rowCount } = await this.pool.query(
      `UPDATE webhooks.delivery_queue SET due_at = $1, claimed_by = NULL, claimed_until = NULL
        WHERE claimed_by = $2 AND ($3::bigint[] IS NULL OR delivery_id = ANY($3::bigint[]))`,
      [now, claims.worker, claims.ids ?? null],
    );
    if ((rowCount ?? 0) > 0) await this.wake();
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
         RETURNING id, org_id
       ), attempts AS (
         DELETE FROM webhooks.webhook_deliveries__attempt_log WHERE record_id IN (SELECT id FROM gone)
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
   * Deliveries queued (due or not, lapsed claims included) and claimed, and how long the oldest due
   * one has waited past its due time (0 when none is due), for the queue gauges.
   */
  async depth(now: Date): Promise<QueueDepth> {
    const { rows } = await this.pool.query<QueueDepth>(
      `SELECT count(*) FILTER (WHERE claimed_by IS NULL OR claimed_until <= $1)::int AS pending,
              count(*) FILTER (WHERE claimed_by IS NOT NULL AND claimed_until > $1)::int AS sending,
              coalesce(extract(epoch FROM $1::timestamptz - min(due_at)
                FILTER (WHERE due_at <= $1 AND (claimed_by IS NULL OR claimed_until <= $1))), 0)::float8
                AS "oldestDueSeconds"
         FROM webhooks.delivery_queue`,
      [now],
    );
    return rows[0] ?? { pending: 0, sending: 0, oldestDueSeconds: 0 };
  }

  /** Wakes the idle workers of every process: deliveries became due, or endpoint slots free. */
  private async wake(): Promise<void> {
    await this.pool.query(`SELECT pg_notify('${DELIVERIES_CHANNEL}', '')`);
  }
}

/** What the queue gauges show. */
export interface QueueDepth {
  readonly pending: number;
  readonly sending: number;
  readonly oldestDueSeconds: number;
}

/** A claim's row: what the rates did, and a delivery claimed (none: a row of nulls). */
type ClaimRow = { held_back: number; next_token_at: Date | null } & ({ id: null } | ClaimedRow);

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
