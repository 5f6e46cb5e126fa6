-- The subscriber portal's sessions (docs/api-notes.md "Subscriber portal"): each a short-lived bearer
-- token, minted by an integrator's `operations` token, that opens that organization's webhooks to the
-- portal page. Only the token's SHA-256 is kept, as for the auth service's client secrets; a session
-- past its expiry is refused, and deleted by the dispatcher's hourly purge.
CREATE TABLE webhooks.portal_sessions (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  token_hash bytea NOT NULL UNIQUE,
  org_id bigint NOT NULL,
  -- The client whose token minted it: the portal's changes are that client's.
  client_id text NOT NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX portal_sessions_expiry ON webhooks.portal_sessions (expires_at);
