-- A claim writes no index entry (issue 25 item 4): it was an update of the queue row's due time, which
-- two indexes cover, and of its claimant, in the predicate of a third, so every claim wrote the row
-- anew in four indexes. A claim now keeps its lease in `claimed_until` and its worker in `claimed_by`,
-- which no index covers, and leaves the due time alone: a heap-only (HOT) update, its new version on
-- the same page (half of each page is left free for it). Claims skip the claimed deliveries they
-- meet and count them against the endpoint's limit (DeliveryQueue.claim); the index of claims per
-- endpoint, which they read for that, goes. A lapsed claim (`claimed_until` passed) is due again.
-- Every dispatcher of the version before must be stopped before this runs (they read a claimed row's
-- due time as its lease).
ALTER TABLE webhooks.delivery_queue ADD COLUMN claimed_until timestamptz, SET (fillfactor = 50);
UPDATE webhooks.delivery_queue SET claimed_until = due_at, due_at = now() WHERE claimed_by IS NOT NULL;
DROP INDEX webhooks.delivery_queue_claimed;
