-- Per-endpoint delivery rates (issue 26 item 5: `rate_limit` on the webhook, deliveries per second). Each
-- rate-limited endpoint's token bucket, kept as the one time GCRA needs: `tat`, when the bucket would be
-- full again had nothing more been taken (the theoretical arrival time); and `held_until`, the due time
-- of the last delivery a claim put off to its token, after which the next one put off goes. Claims,
-- serialized by their
-- advisory lock, read and advance it in the statement that claims, so the rate holds across every
-- dispatcher process. A row of its own per endpoint, apart from `endpoints`, whose health the recording
-- of attempts writes: a claim never waits for one.
CREATE TABLE webhooks.endpoint_rates (
  webhook_id bigint PRIMARY KEY,
  tat timestamptz NOT NULL,
  held_until timestamptz
);
