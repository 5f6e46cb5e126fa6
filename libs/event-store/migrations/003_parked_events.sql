-- Events a consumer group could not apply (API.md §12). Per consumer group and stream, the row of
-- the lowest version is the parked event, with the reason it failed; the stream's later events wait
-- behind it (reason null) until an operator's retry applies them in order.
CREATE TABLE es.parked_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  consumer_group text NOT NULL,
  event_id uuid NOT NULL REFERENCES es.events (event_id),
  stream_id text NOT NULL,
  version integer NOT NULL,
  -- Why the consumer could not apply it; null for an event that waits behind the parked one.
  reason text,
  attempts integer NOT NULL DEFAULT 0,
  parked_at timestamptz NOT NULL DEFAULT now(),
  -- Set by an operator's retry, cleared by the consumer that takes it up.
  retry_requested_at timestamptz,
  UNIQUE (consumer_group, event_id)
);
CREATE INDEX parked_events_stream ON es.parked_events (consumer_group, stream_id, version);
