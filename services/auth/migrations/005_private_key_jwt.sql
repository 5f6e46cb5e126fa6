-- private_key_jwt client authentication (RFC 7523 §2.2, OIDC Core §9; API.md §7): a client registered
-- with a JWKS (its public keys) authenticates with a JWT it signs, and with nothing else; it has no secret.
ALTER TABLE auth.clients ADD COLUMN jwks jsonb;
ALTER TABLE auth.clients ALTER COLUMN secret_hash DROP NOT NULL;
ALTER TABLE auth.clients ADD CONSTRAINT clients_one_credential CHECK ((secret_hash IS NULL) <> (jwks IS NULL));

-- The jti of each client assertion accepted, until the assertion expires: a replay is refused (RFC 7523
-- §3 item 7). The janitor forgets them once expired.
CREATE TABLE auth.client_assertions (
  client_id text NOT NULL REFERENCES auth.clients (id) ON DELETE CASCADE,
  jti text NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (client_id, jti)
);
CREATE INDEX client_assertions_expires_at ON auth.client_assertions (expires_at);
