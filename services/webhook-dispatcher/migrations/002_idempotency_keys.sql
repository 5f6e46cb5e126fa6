-- Idempotency-Key on webhook writes (API.md §5), laid out as the api's api.idempotency_keys.
CREATE TABLE webhooks.idempotency_keys (
  org_id bigint NOT NULL,
  key text NOT NULL,
  request_hash text NOT NULL,
  status integer NOT NULL,
  headers jsonb NOT NULL,
  body jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (org_id, key)
);
CREATE INDEX idempotency_keys_created ON webhooks.idempotency_keys (created_at);
