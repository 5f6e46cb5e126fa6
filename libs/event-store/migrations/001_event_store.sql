-- The event store: one row per event, appended with an expected stream version.
CREATE SCHEMA IF NOT EXISTS es;

CREATE TABLE es.events (
  -- Global position: assigned at insert, so it is NOT commit order under concurrent appends.
  position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- The appending transaction's id. Readers only take events of transactions older than every
  -- transaction still in flight (pg_snapshot_xmin), so an event that commits late is never skipped.
  transaction_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
  event_id uuid NOT NULL UNIQUE,
  stream_id text NOT NULL,
  stream_type text NOT NULL,
  version integer NOT NULL CHECK (version > 0),
  type text NOT NULL,
  org_id bigint,
  data jsonb NOT NULL,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  recorded_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  UNIQUE (stream_id, version)
);
CREATE INDEX events_global_order ON es.events (transaction_id, position);

-- Events still to be published to Kafka by the outbox relay (distributed mode only).
CREATE TABLE es.outbox (
  position bigint PRIMARY KEY REFERENCES es.events (position),
  transaction_id xid8 NOT NULL
);
CREATE INDEX outbox_order ON es.outbox (transaction_id, position);

-- Where each consumer group of the Postgres-log bus has got to.
CREATE TABLE es.checkpoints (
  consumer_group text PRIMARY KEY,
  transaction_id xid8 NOT NULL,
  position bigint NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
