import { SCOPES } from '@ofp/auth-tokens';

const CLIENT_AUTH_METHODS = ['client_secret_basic', 'client_secret_post'];

/**
 * The authorization server metadata (RFC 8414 §2). Clients such as openid-client check that `issuer`
 * equals the URL they discovered it from (§3.3), hence the deployment's public base URL (API.md §7).
 */
export function authorizationServerMetadata(issuer: string): Record<string, unknown> {
  return {
    issuer,
    authorization_endpoint: `${issuer}/oauth/authorize`,
    token_endpoint: `${issuer}/oauth/token`,
    jwks_uri: `${issuer}/.well-known/jwks.json`,
    revocation_endpoint: `${issuer}/oauth/revoke`,
    introspection_endpoint: `${issuer}/oauth/introspect`,
    scopes_supported: [...SCOPES],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token', 'client_credentials'],
    token_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
    revocation_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
    introspection_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
    code_challenge_methods_supported: ['S256'],
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
