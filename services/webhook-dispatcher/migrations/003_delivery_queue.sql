-- The delivery queue apart from the searchable delivery record (issue 25 item 4). A delivery's row in
-- webhook_deliveries is written when it is queued and when each of its attempts is recorded; what
-- changes in between (its record's turn, its claim, its place in the retry schedule) lives in a narrow
-- row of delivery_queue for as long as the delivery is open: queued, waiting for its turn, or on the wire.
-- Every dispatcher of the version before must be stopped before this runs (they use the columns it drops).
CREATE TABLE webhooks.delivery_queue (
  delivery_id bigint PRIMARY KEY,
  webhook_id bigint NOT NULL,
  -- The record's stream and version: one endpoint gets one stream's events in `sequence` order (API.md
  -- §8). NULL for `webhook.test`, which belongs to no stream.
  stream_id text COLLATE "C",
  sequence integer,
  -- When it may be claimed. NULL while an earlier delivery of its record to the same endpoint is open
  -- (it is not its turn: only the first open delivery of a record has one, and only deliveries whose
  -- turn it is are looked at by claims). While claimed: when the claim lapses, should its worker hang
  -- without dying; a lapsed claim is simply due again.
  due_at timestamptz,
  -- While claimed: the advisory lock key of the worker process sending it.
  claimed_by integer,
  -- Attempts since the delivery was last queued (`retry`, `recover` queue it again): its place in the
  -- retry schedule. The record's `attempts` counts every attempt.
  round_attempts integer NOT NULL DEFAULT 0
) WITH (
  -- Rows live for seconds and change two or three times: vacuum them often, not at a fifth of the table.
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 10000,
  autovacuum_vacuum_cost_delay = 0
);
-- What claims walk, oldest first: deliveries whose turn it is, and lapsed claims.
CREATE INDEX delivery_queue_due ON webhooks.delivery_queue (due_at, delivery_id) WHERE due_at IS NOT NULL;
-- The open deliveries of a record at an endpoint, in order: whose turn it is.
CREATE INDEX delivery_queue_turns ON webhooks.delivery_queue (webhook_id, stream_id, sequence)
  WHERE stream_id IS NOT NULL;
-- The claims of an endpoint: its per-endpoint concurrency.
CREATE INDEX delivery_queue_claimed ON webhooks.delivery_queue (webhook_id) WHERE claimed_by IS NOT NULL;

INSERT INTO webhooks.delivery_queue (delivery_id, webhook_id, stream_id, sequence, due_at, claimed_by, round_attempts)
SELECT id, webhook_id, stream_id, sequence,
       CASE WHEN status = 'sending' THEN lease_expires_at WHEN head THEN next_attempt_at END,
       claimed_by, round_attempts
  FROM webhooks.webhook_deliveries
 WHERE status IN ('pending', 'sending');
-- A delivery on the wire shows as pending until its attempt is recorded.
UPDATE webhooks.webhook_deliveries SET status = 'pending' WHERE status = 'sending';

-- The record keeps no index on what its attempts change (status, attempts, times, version), so that
-- recording an attempt is a HOT update: no index is written, and the new row version stays on its page
-- (half of each page is left free for it).
DROP INDEX webhooks.webhook_deliveries_due, webhooks.webhook_deliveries_waiting,
  webhooks.webhook_deliveries_open_by_stream, webhooks.webhook_deliveries_sending,
  webhooks.webhook_deliveries_failed, webhooks.webhook_deliveries_org_status,
  webhooks.webhook_deliveries_org_event, webhooks.webhook_deliveries_once;
ALTER TABLE webhooks.webhook_deliveries
  DROP COLUMN head,
  DROP COLUMN round_attempts,
  DROP COLUMN claimed_by,
  DROP COLUMN lease_expires_at,
  SET (fillfactor = 50);
-- At most one delivery per (endpoint, event): the bus delivers at least once. Also finds an event's
-- deliveries (`event_id` searches).
CREATE UNIQUE INDEX webhook_deliveries_once ON webhooks.webhook_deliveries (event_id, webhook_id);
-- An endpoint's deliveries (`webhook_id` searches, `deliveries.*` of webhooks, `recover`).
CREATE INDEX webhook_deliveries_endpoint ON webhooks.webhook_deliveries (webhook_id, id);
-- Failed attempts by kind; successful attempts, most of them, are not indexed.
DROP INDEX webhooks.webhook_deliveries_attempt_errors;
CREATE INDEX webhook_deliveries_attempt_errors ON webhooks.webhook_deliveries__attempt_log (org_id, error_kind, record_id)
  WHERE error_kind IS NOT NULL;
-- An attempt is recorded by the statement that writes its delivery's row: the foreign key's check, a
-- query and a row lock per attempt, guards nothing, and the purge deletes a delivery's attempts itself.
ALTER TABLE webhooks.webhook_deliveries__attempt_log
  DROP CONSTRAINT webhook_deliveries__attempt_log_record_id_fkey;
