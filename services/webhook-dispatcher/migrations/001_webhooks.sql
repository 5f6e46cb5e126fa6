-- The dispatcher's own bookkeeping in schema `webhooks`, beside the registry-derived tables that
-- migrateWebhookDispatcher lays out first (`webhooks`, `webhooks__events`, `webhook_deliveries`,
-- `webhook_deliveries__attempt_log`, `record_counts`, `deleted_records`; see src/schema.ts).

-- Ids are unique per model across all organizations (API.md §1).
CREATE SEQUENCE webhooks.webhook_ids;
CREATE SEQUENCE webhooks.delivery_ids;

-- external_id is unique per organization and model (API.md §1).
CREATE UNIQUE INDEX webhooks_external_id ON webhooks.webhooks (org_id, external_id)
  WHERE external_id IS NOT NULL;

-- What an endpoint needs that no response may show: its secrets. And its health.
CREATE TABLE webhooks.endpoints (
  webhook_id bigint PRIMARY KEY,
  org_id bigint NOT NULL,
  secret text NOT NULL,
  -- The secret before the last rotation; deliveries are signed with it too until it expires (API.md §8: 24 h).
  previous_secret text,
  previous_secret_expires_at timestamptz,
  -- Start of the current run of failed attempts, NULL after a success: 5 days of it disable the endpoint.
  failing_since timestamptz,
  -- Set (`gone`, `failing`) in the transaction that records an attempt demanding a disable; cleared in
  -- the transaction that appends `webhook.disabled`, so a crash between the two loses nothing.
  disable_reason text
);
CREATE INDEX endpoints_to_disable ON webhooks.endpoints (webhook_id) WHERE disable_reason IS NOT NULL;

-- The delivery queue: one row per (event, endpoint), in the registry's `webhook_deliveries` layout.
ALTER TABLE webhooks.webhook_deliveries
  ALTER COLUMN id SET DEFAULT nextval('webhooks.delivery_ids'),
  -- The record's stream and version: one endpoint gets one stream's events in `sequence` order.
  -- NULL for `webhook.test`, which belongs to no stream.
  ADD COLUMN stream_id text,
  ADD COLUMN sequence integer,
  -- Whether it is its record's turn at its endpoint (no earlier delivery open): only such deliveries are
  -- looked at by claims, so a backlog of later versions waiting for an earlier one costs a claim
  -- nothing. Set at queueing, passed on when a delivery finishes (DeliveryQueue.passTurns). Claims
  -- still check the order themselves.
  ADD COLUMN head boolean NOT NULL DEFAULT true,
  -- Attempts since the delivery was last queued (`retry`, `recover` queue it again): the position in
  -- the retry schedule. `attempts` counts every attempt.
  ADD COLUMN round_attempts integer NOT NULL DEFAULT 0,
  -- While `sending`: the advisory lock key of the worker process sending it, and when its claim lapses
  -- even if that process seems alive.
  ADD COLUMN claimed_by integer,
  ADD COLUMN lease_expires_at timestamptz;

-- At most one delivery per (endpoint, event): the bus delivers at least once.
CREATE UNIQUE INDEX webhook_deliveries_once ON webhooks.webhook_deliveries (webhook_id, event_id);
-- The queue's access paths: what is due, what waits for an earlier event of its record, what is open
-- per record, what is in flight per endpoint, what `recover` re-sends.
CREATE INDEX webhook_deliveries_due ON webhooks.webhook_deliveries (next_attempt_at, id)
  WHERE status = 'pending' AND head;
CREATE INDEX webhook_deliveries_waiting ON webhooks.webhook_deliveries (webhook_id, stream_id, sequence)
  WHERE status = 'pending' AND NOT head;
CREATE INDEX webhook_deliveries_open_by_stream ON webhooks.webhook_deliveries (webhook_id, stream_id, sequence)
  WHERE status IN ('pending', 'sending');
CREATE INDEX webhook_deliveries_sending ON webhooks.webhook_deliveries (webhook_id, claimed_by)
  WHERE status = 'sending';
CREATE INDEX webhook_deliveries_failed ON webhooks.webhook_deliveries (webhook_id, created_at)
  WHERE status = 'failed';
-- Searches (every `q` filters by organization; `id asc` breaks ties).
CREATE INDEX webhook_deliveries_org ON webhooks.webhook_deliveries (org_id, id);
CREATE INDEX webhook_deliveries_org_status ON webhooks.webhook_deliveries (org_id, status, id);
CREATE INDEX webhook_deliveries_org_event ON webhooks.webhook_deliveries (org_id, event_id);
CREATE INDEX webhook_deliveries_org_type ON webhooks.webhook_deliveries (org_id, event_type, id);
CREATE INDEX webhook_deliveries_org_created ON webhooks.webhook_deliveries (org_id, created_at, id);
CREATE INDEX webhook_deliveries_attempt_errors ON webhooks.webhook_deliveries__attempt_log (org_id, error_kind, record_id);
