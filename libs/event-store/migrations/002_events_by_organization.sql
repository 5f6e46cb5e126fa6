-- An organization's events in the global order, for the events feed (GET /v2/events): its reads
-- walk this index from a cursor, never the other organizations' events.
-- IF NOT EXISTS: on a large table an operator builds it CONCURRENTLY before upgrading, without
-- blocking writes, and this finds it (docs/operations.md, "Upgrading").
CREATE INDEX IF NOT EXISTS events_organization_order ON es.events (org_id, transaction_id, position) WHERE org_id IS NOT NULL;
