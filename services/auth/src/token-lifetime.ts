/**
 * How long an access token lives (API.md §7: `expires_in` 10800). The signing keys keep a retired key
 * published this long, so that every token it signed still verifies.
 */
export const ACCESS_TOKEN_TTL_SECONDS = 10_800;
