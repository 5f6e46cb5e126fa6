-- Clients an operator manages after registration (API.md §10): a client for the client-credentials
-- grant alone needs no redirect URI, and a disabled client authenticates no more (its grants are
-- revoked when it is disabled).
ALTER TABLE auth.clients ALTER COLUMN redirect_uri DROP NOT NULL;
ALTER TABLE auth.clients ADD COLUMN disabled_at timestamptz;

-- Disabling a client revokes its live grants.
CREATE INDEX grants_live_by_client ON auth.grants (client_id) WHERE revoked_at IS NULL;
