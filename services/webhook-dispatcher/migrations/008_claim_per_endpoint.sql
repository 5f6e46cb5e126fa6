-- Claims look at each endpoint's due deliveries apart (a skip scan over the endpoints with deliveries
-- queued, then each one's oldest due, no more than it may take): an endpoint whose concurrency is spent
-- and whose backlog is long no longer fills the scan that other endpoints' deliveries wait behind.
-- The index serves both; the index of every due delivery in due order, which the claim walked, has no
-- reader left (the queue gauges count the whole table).
-- IF NOT EXISTS: on a large table an operator builds it CONCURRENTLY before upgrading, without
-- blocking writes, and this finds it (docs/operations.md, "Upgrading").
CREATE INDEX IF NOT EXISTS delivery_queue_endpoint_due ON webhooks.delivery_queue (webhook_id, due_at, delivery_id)
  WHERE due_at IS NOT NULL;
DROP INDEX webhooks.delivery_queue_due;
