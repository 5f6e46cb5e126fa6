-- The body a delivery sends is its registry field `payload` (shown by the API, kept as long as the
-- delivery): declared, it is laid out with the registry's columns, before the migrations run. A database
-- laid out before keeps the column 001 added; either way it holds every delivery's body.
ALTER TABLE webhooks.webhook_deliveries
  ALTER COLUMN payload SET NOT NULL,
  ALTER COLUMN payload TYPE text COLLATE "C";
