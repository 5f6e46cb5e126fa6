-- A portal session ends with the token that minted it: revoking that token (RFC 7009), its grant, or
-- disabling its client is heard by every service as a revocation (API.md §7), and the bearer gate
-- refuses the session by the minting token's `jti` and grant as it refuses the token itself. Sessions
-- minted before this know neither, and still end with their client (or their expiry, at most 24 h).
ALTER TABLE webhooks.portal_sessions
  ADD COLUMN minted_by_token text,
  ADD COLUMN minted_by_grant text;
