-- An organization's events in the global order, for the events feed (GET /v2/events): its reads
-- walk this index from a cursor, never the other organizations' events.
CREATE INDEX events_organization_order ON es.events (org_id, transaction_id, position) WHERE org_id IS NOT NULL;
