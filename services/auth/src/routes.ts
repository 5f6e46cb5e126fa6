import type { z } from 'zod';
import { baseError, singleEnvelope } from '@ofp/contracts';
import type {
  AuthContext,
  AuthMetrics,
  BearerGate,
  Clock,
  TokenBucketLimiter,
  TokenVerifier,
} from '@ofp/auth-tokens';
import { PUBLIC, bearerChallenge, jsonReply, type Pool, type Reply, type Route } from '@ofp/runtime';
import { authorizeEndpoint } from './oauth/authorize.js';
import { clientAccess, type ClientRequest } from './oauth/client-auth.js';
import { oauthErrorReply } from './oauth/errors.js';
import type { FailedAuthenticationLimits } from './oauth/failed-authentication.js';
import type { Grants } from './oauth/grants.js';
import { authorizationServerMetadata, metadataPaths } from './oauth/metadata.js';
import { introspectEndpoint, revokeEndpoint } from './oauth/revoke-introspect.js';
import { tokenEndpoint } from './oauth/token.js';
import {
  authenticatedSchema,
  introspectionSchema,
  jwksSchema,
  metadataSchema,
  oauthErrorSchema,
  tokenParameterSchema,
  tokenRequestSchema,
  tokenResponseSchema,
} from './schemas.js';
import type { SigningKeys } from './signing-keys.js';

export interface AuthRoutesDeps {
  pool: Pool;
  clock: Clock;
  issuer: string;
  keys: SigningKeys;
  grants: Grants;
  /** Per-client rate limit of the client-authenticated endpoints. */
  limiter: TokenBucketLimiter;
  /** Limits on their failed client authentications (API.md §12). */
  failures: FailedAuthenticationLimits;
  /** Verifies this service's own access tokens for revocation and introspection. */
  verifier: TokenVerifier;
  /** `/v2/authenticate`'s bearer check: this service's verifier and the rate limit. */
  gate: BearerGate;
  metrics?: AuthMetrics;
}

/**
 * The auth service's part of the route table: the OAuth 2.0 endpoints of API.md §7 (their errors in
 * RFC 6749 §5.2's format), the metadata and keys (RFC 8414, the JWKS), and `/v2/authenticate`.
 */
export function authRoutes(deps: AuthRoutesDeps): Route[] {
  const metadata = JSON.stringify(authorizationServerMetadata(deps.issuer));
  const authorize = authorizeEndpoint(deps);
  const client = clientAccess(deps.pool, deps.limiter, deps.failures, deps.metrics);
  const oauth = (
    path: string,
    operationId: string,
    summary: string,
    schemas: { request: z.ZodType; response?: z.ZodType },
    handle: (request: ClientRequest) => Promise<Reply>,
  ): Route<ClientRequest> => ({
    method: 'POST',
    path,
    operationId,
    summary,
    tag: 'OAuth',
    access: client,
    body: 'form',
    request: schemas.request,
    responses: {
      200: {
        description: summary,
        headers: ['Cache-Control'],
        ...(schemas.response ? { schema: schemas.response } : {}),
      },
      400: { description: 'An OAuth error (RFC 6749 §5.2)', schema: oauthErrorSchema },
      401: { description: 'Client authentication failed (invalid_client)', schema: oauthErrorSchema },
      429: {
        description: 'Too many requests, or too many failed client authentications (slow_down)',
        headers: ['Retry-After'],
        schema: oauthErrorSchema,
      },
    },
    handle: (request) => handle(request.principal),
    renderError: oauthErrorReply,
  });
  return [
    ...metadataPaths(deps.issuer).map((path, i): Route => ({
      method: 'GET',
      path,
      operationId: i === 0 ? 'oauth.metadata' : 'oauth.metadataForIssuerPath',
      summary: 'Authorization server metadata (RFC 8414)',
      tag: 'OAuth',
      access: PUBLIC,
      responses: { 200: { description: 'The metadata', schema: metadataSchema } },
      handle: () =>
        Promise.resolve({ status: 200, headers: { 'Cache-Control': 'public, max-age=300' }, body: metadata }),
    })),
    {
      method: 'GET',
      path: '/.well-known/jwks.json',
      operationId: 'oauth.jwks',
      summary: 'The public keys that sign access tokens (RFC 7517)',
      tag: 'OAuth',
      access: PUBLIC,
      responses: { 200: { description: 'The key set', schema: jwksSchema } },
      // Short-lived caching: verifiers refetch on an unknown kid and must then see a new key at once.
      handle: async () => jsonReply(200, await deps.keys.jwks(), { 'Cache-Control': 'public, max-age=60' }),
    },
    {
      method: 'GET',
      path: '/oauth/authorize',
      operationId: 'oauth.authorize',
      summary: 'Authorization code request (RFC 6749 §4.1.1, PKCE S256)',
      tag: 'OAuth',
      access: PUBLIC,
      query: 'any',
      responses: {
        302: { description: 'Redirect to the registered URI with a code or an error', headers: ['Location'] },
        400: { description: 'A redirect_uri other than the registered one', schema: oauthErrorSchema },
        401: { description: 'Unknown client_id', schema: oauthErrorSchema },
      },
      handle: (request) => authorize(request.url),
      renderError: oauthErrorReply,
    },
    oauth(
      '/oauth/token',
      'oauth.token',
      'Token request (RFC 6749 §3.2)',
      { request: tokenRequestSchema, response: tokenResponseSchema },
      tokenEndpoint(deps),
    ),
    oauth(
      '/oauth/revoke',
      'oauth.revoke',
      'Token revocation (RFC 7009)',
      { request: tokenParameterSchema },
      revokeEndpoint(deps),
    ),
    oauth(
      '/oauth/introspect',
      'oauth.introspect',
      'Token introspection (RFC 7662)',
      { request: tokenParameterSchema, response: introspectionSchema },
      introspectEndpoint(deps),
    ),
    authenticateRoute(deps),
  ];
}

/**
 * `GET /v2/authenticate` (API.md §7): whether a token works, and for which organization. Served by
 * the auth service because it owns organizations; the ingress routes this path here.
 */
function authenticateRoute(deps: AuthRoutesDeps): Route<AuthContext> {
  return {
    method: 'GET',
    path: '/v2/authenticate',
    operationId: 'authenticate',
    summary: 'Whether a token works, and for which organization',
    tag: 'Authentication',
    access: deps.gate.access([]),
    responses: { 200: { description: 'The organization the token speaks for', schema: authenticatedSchema } },
    handle: (request) => authenticate(deps, request.principal),
  };
}

async function authenticate(deps: AuthRoutesDeps, auth: AuthContext): Promise<Reply> {
  const client = await deps.pool.connect();
  try {
    if (!(await deps.grants.accessTokenLive(client, auth))) {
      throw baseError('Unauthenticated', 'The access token was revoked', {
        'WWW-Authenticate': bearerChallenge({
          code: 'invalid_token',
          description: 'The access token was revoked',
        }),
      });
    }
    const { rows } = await client.query<{ id: number; name: string }>(
      'SELECT id, name FROM auth.organizations WHERE id = $1',
      [auth.orgId],
    );
    const organization = rows[0];
    if (!organization)
      throw baseError('Unauthenticated', 'The organization no longer exists', {
        'WWW-Authenticate': bearerChallenge({ code: 'invalid_token' }),
      });
    return jsonReply(
      200,
      singleEnvelope({ message: `Successfully authenticated as ${organization.name}`, organization }),
    );
  } finally {
    client.release();
  }
}
