-- Client credentials store nothing per token (API.md §7): no grant, no refresh token. A revoked one is
-- remembered by its jti until it expires, for introspection and /v2/authenticate (every other service
-- learns of it from the announcement); the janitor forgets it then.
CREATE TABLE auth.revoked_access_tokens (
  token_id uuid PRIMARY KEY, -- the access token's jti
  client_id text NOT NULL,
  expires_at timestamptz NOT NULL
);
CREATE INDEX revoked_access_tokens_expires_at ON auth.revoked_access_tokens (expires_at);

-- What the janitor scans for (API.md §7: expired codes, grants and refresh tokens are purged).
-- IF NOT EXISTS: on a large table an operator builds it CONCURRENTLY before upgrading, without
-- blocking writes, and this finds it (docs/operations.md, "Upgrading").
CREATE INDEX IF NOT EXISTS refresh_tokens_expires_at ON auth.refresh_tokens (expires_at);
CREATE INDEX IF NOT EXISTS authorization_codes_expires_at ON auth.authorization_codes (expires_at);
CREATE INDEX IF NOT EXISTS grants_revoked ON auth.grants (id) WHERE revoked_at IS NOT NULL;
