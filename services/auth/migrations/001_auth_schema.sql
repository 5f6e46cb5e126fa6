-- The auth service's state (ARCHITECTURE.md: schema `auth`). Secrets, codes and refresh tokens are
-- stored only as SHA-256 digests: each is 256 random bits, so a digest cannot be reversed by guessing,
-- and a database leak yields nothing usable.
CREATE SCHEMA IF NOT EXISTS auth;

CREATE TABLE auth.organizations (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  name text NOT NULL,
  created_at timestamptz NOT NULL
);

CREATE TABLE auth.clients (
  id text PRIMARY KEY, -- the public client_id
  organization_id bigint NOT NULL REFERENCES auth.organizations (id),
  name text NOT NULL,
  redirect_uri text NOT NULL,
  scopes text[] NOT NULL,
  secret_hash bytea NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX clients_organization_id ON auth.clients (organization_id);

CREATE TABLE auth.authorization_codes (
  id uuid PRIMARY KEY,
  code_hash bytea NOT NULL UNIQUE,
  client_id text NOT NULL REFERENCES auth.clients (id),
  -- The redirect_uri parameter of the authorization request, when it carried one: the token request
  -- must then repeat it (RFC 6749 §4.1.3).
  redirect_uri text,
  scopes text[] NOT NULL,
  code_challenge text, -- PKCE S256 (RFC 7636 §4.2)
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  used_at timestamptz
);

-- A grant: one authorization (a redeemed code, or a client_credentials request) and the family of
-- token pairs issued under it by rotation. Access tokens carry its id as `gid`.
CREATE TABLE auth.grants (
  id uuid PRIMARY KEY,
  client_id text NOT NULL REFERENCES auth.clients (id),
  organization_id bigint NOT NULL REFERENCES auth.organizations (id),
  scopes text[] NOT NULL,
  authorization_code_id uuid UNIQUE REFERENCES auth.authorization_codes (id),
  created_at timestamptz NOT NULL,
  revoked_at timestamptz
);

-- One row per token pair: the refresh token and the access token issued with it.
CREATE TABLE auth.refresh_tokens (
  id uuid PRIMARY KEY,
  grant_id uuid NOT NULL REFERENCES auth.grants (id),
  token_hash bytea NOT NULL UNIQUE,
  scopes text[] NOT NULL,
  access_token_id uuid NOT NULL, -- the access token's jti
  access_token_expires_at timestamptz NOT NULL,
  issued_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  -- active: the grant's current refresh token; rotated: exchanged for a newer pair;
  -- superseded: its pair was replaced by a retry of the token before it (API.md §7).
  state text NOT NULL CHECK (state IN ('active', 'rotated', 'superseded')),
  rotated_at timestamptz,
  replaced_by uuid REFERENCES auth.refresh_tokens (id),
  retried_at timestamptz
);
CREATE INDEX refresh_tokens_grant_id ON auth.refresh_tokens (grant_id);

CREATE TABLE auth.signing_keys (
  kid text PRIMARY KEY, -- the RFC 7638 thumbprint of the public key
  private_key text NOT NULL, -- PKCS#8 PEM
  public_jwk jsonb NOT NULL,
  created_at timestamptz NOT NULL,
  retired_at timestamptz -- when it stopped signing; published until its last token expired
);
-- Exactly one key signs at a time.
CREATE UNIQUE INDEX signing_keys_one_active ON auth.signing_keys ((true)) WHERE retired_at IS NULL;

-- The standalone demo client (ensureDemoTenant). Its secret is kept readable on purpose: the runner
-- prints it on every start, and only this one demo client of a local installation is stored this way.
CREATE TABLE auth.demo_tenant (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  client_id text NOT NULL REFERENCES auth.clients (id),
  client_secret text NOT NULL
);
