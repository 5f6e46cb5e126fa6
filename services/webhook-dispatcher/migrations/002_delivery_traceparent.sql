-- A delivery carries the W3C trace context of the change it announces (API.md §8 `traceparent`).
ALTER TABLE webhooks.webhook_deliveries ADD COLUMN traceparent text;
