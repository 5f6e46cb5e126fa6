-- Deliveries given up after their last attempt whose `webhook.delivery_failed` notice is still to be
-- queued for the organization's other endpoints: written by the statement that records the attempt,
-- deleted once the notices are queued (FailureAnnouncer), so a process that dies in between loses none.
CREATE TABLE webhooks.delivery_failures (
  delivery_id bigint PRIMARY KEY,
  -- The notice's event id (its `webhook-id`), the same however often it is queued.
  event_id uuid NOT NULL DEFAULT gen_random_uuid(),
  failed_at timestamptz NOT NULL
);
