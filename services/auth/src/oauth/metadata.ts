import { DPOP_ALGORITHMS, SCOPES } from '@ofp/auth-tokens';
import { ASSERTION_ALGORITHMS } from './client-auth.js';

const CLIENT_AUTH_METHODS = ['client_secret_basic', 'client_secret_post', 'private_key_jwt'];

/** The token endpoint's URL, also an audience a client assertion may name (RFC 7523 §3). */
export function tokenEndpoint(issuer: string): string {
  return `${issuer}/oauth/token`;
}

/** The token endpoint's grants (API.md §7); every client may use all three. */
export const GRANT_TYPES = ['authorization_code', 'refresh_token', 'client_credentials'] as const;
export type GrantType = (typeof GRANT_TYPES)[number];

/**
 * The authorization server metadata (RFC 8414 §2). Clients such as openid-client check that `issuer`
 * equals the URL they discovered it from (§3.3), hence the deployment's public base URL (API.md §7).
 */
export function authorizationServerMetadata(issuer: string): Record<string, unknown> {
  return {
    issuer,
    authorization_endpoint: `${issuer}/oauth/authorize`,
    token_endpoint: tokenEndpoint(issuer),
    jwks_uri: `${issuer}/.well-known/jwks.json`,
    revocation_endpoint: `${issuer}/oauth/revoke`,
    introspection_endpoint: `${issuer}/oauth/introspect`,
    scopes_supported: [...SCOPES],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: [...GRANT_TYPES],
    token_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
    revocation_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
    introspection_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
    // private_key_jwt's assertions (RFC 7523): signed with one of these by a key of the client's JWKS.
    token_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGORITHMS,
    revocation_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGORITHMS,
    introspection_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGORITHMS,
    code_challenge_methods_supported: ['S256'],
    // RFC 9449 §5.1: DPoP proofs are accepted, signed with one of these.
    dpop_signing_alg_values_supported: DPOP_ALGORITHMS,
    // RFC 9207: authorization responses carry `iss`, against mix-up attacks.
    authorization_response_iss_parameter_supported: true,
  };
}

/**
 * Where the metadata is served (RFC 8414 §3.1): the well-known path, and for an issuer with a path
 * component the well-known path with that component appended.
 */
export function metadataPaths(issuer: string): string[] {
  const path = new URL(issuer).pathname.replace(/\/+$/, '');
  const base = '/.well-known/oauth-authorization-server';
  return path === '' ? [base] : [base, `${base}${path}`];
}
