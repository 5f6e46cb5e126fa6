-- Clients are listed by creation (API.md §10): created_at alone ties for clients created in the same
-- millisecond, and their random ids do not say which came first.
ALTER TABLE auth.clients ADD COLUMN creation_order bigint GENERATED ALWAYS AS IDENTITY;
