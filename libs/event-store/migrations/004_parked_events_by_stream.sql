-- The parked events of one stream, whatever their group: every append checks that its stream has
-- none (API.md §12) and a refused one looks up which. 003's index led with consumer_group, so those
-- lookups searched it once per group (Postgres 18's skip scan) or read it whole (older servers); led
-- by stream_id, one search serves them and the lookups of one group's stream (hold, first, waiting).
CREATE INDEX parked_events_by_stream ON es.parked_events (stream_id, consumer_group, version);
DROP INDEX es.parked_events_stream;
