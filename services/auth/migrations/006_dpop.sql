-- DPoP (RFC 9449; API.md §7). A client registered with dpop_bound_access_tokens (RFC 9449 §5.2) gets
-- tokens only with a DPoP proof, each bound to the proof's key.
ALTER TABLE auth.clients ADD COLUMN dpop_bound_access_tokens boolean NOT NULL DEFAULT false;

-- The thumbprint (RFC 7638) of the DPoP key a grant was issued with: its refresh tokens are bound to that
-- key (RFC 9449 §5), and a refresh needs a proof signed by it. Null for a grant issued without a proof.
ALTER TABLE auth.grants ADD COLUMN dpop_jkt text;
