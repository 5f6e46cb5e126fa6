-- The command side's own bookkeeping, written in the same transaction as the events it guards.
CREATE SCHEMA IF NOT EXISTS api;

-- Values that must be unique per organization and model (external_id, sku, order_number...).
-- A record's reservation moves with it on update and is released on delete.
CREATE TABLE api.unique_values (
  org_id bigint NOT NULL,
  model text NOT NULL,
  field text NOT NULL,
  value text NOT NULL,
  record_id bigint NOT NULL,
  PRIMARY KEY (org_id, model, field, value)
);
CREATE INDEX unique_values_record ON api.unique_values (model, record_id);

-- Idempotency-Key (API.md §5): the first response to a key, replayed for 24 hours.
CREATE TABLE api.idempotency_keys (
  org_id bigint NOT NULL,
  key text NOT NULL,
  request_hash text NOT NULL,
  status integer NOT NULL,
  headers jsonb NOT NULL,
  body jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, key)
);
CREATE INDEX idempotency_keys_created ON api.idempotency_keys (created_at);

-- Server-assigned record ids, one sequence for all models: ids are unique per model across all
-- organizations (API.md §1), and a shared sequence keeps that true with one object to manage.
CREATE SEQUENCE api.record_ids;

-- Organizations whose seed records (API.md §6: the Work, Home, Mobile and Fax phone number types)
-- have been created.
CREATE TABLE api.seeded_organizations (
  org_id bigint PRIMARY KEY,
  seeded_at timestamptz NOT NULL DEFAULT now()
);
