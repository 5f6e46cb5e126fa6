import type { z } from 'zod';
import { baseError, singleEnvelope } from '@ofp/contracts';
import type { AuthContext, AuthMetrics, Clock, DpopProofVerifier, TokenVerifier } from '@ofp/auth-tokens';
import { type Pool } from '@ofp/runtime';
import {
  bearerChallenge,
  jsonReply,
  type Operation,
  type Operations,
  type Reply,
  type RouteRequest,
  type RouteSpec,
} from '@ofp/http-api';
import { authorizeEndpoint } from './oauth/authorize.js';
import type { ClientRequest } from './oauth/client-auth.js';
import { oauthErrorReply } from './oauth/errors.js';
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
  /** Verifies the DPoP proofs of token requests (RFC 9449 §5). */
  dpop: DpopProofVerifier;
  /** Verifies this service's own access tokens for revocation and introspection. */
  verifier: TokenVerifier;
  metrics?: AuthMetrics;
}

/**
 * The auth service's part of the route table as data: the OAuth 2.0 endpoints of API.md §7 (their
 * errors in RFC 6749 §5.2's format), the metadata and keys (RFC 8414, the JWKS), and
 * `/v2/authenticate`. `issuer` decides where the metadata is (RFC 8414 §3).
 */
export function authRouteSpecs(issuer: string): RouteSpec[] {
  const oauth = (
    path: string,
    operationId: string,
    [summary, description]: [summary: string, description: string],
    schemas: { request: z.ZodType; response?: z.ZodType },
  ): RouteSpec => ({
    method: 'POST',
    path,
    operationId,
    summary,
    description: `${description} The client authenticates with HTTP Basic (\`client_id:client_secret\`), or \`client_id\` and \`client_secret\` in the form; repeated failures are slowed down (429 \`slow_down\` with \`Retry-After\`). Errors follow RFC 6749 §5.2 (\`{error, error_description}\`).`,
    tag: 'OAuth',
    access: { kind: 'client' },
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
    errorFormat: 'oauth',
  });
  return [
    ...metadataPaths(issuer).map((path, i): RouteSpec => ({
      method: 'GET',
      path,
      operationId: METADATA_OPERATIONS[i]!,
      summary: 'Authorization server metadata (RFC 8414)',
      description:
        "Where the token, authorization, revocation and introspection endpoints and the key set are, the grants and scopes supported: what OAuth libraries (openid-client and others) read to configure themselves from the issuer's URL.",
      tag: 'OAuth',
      access: { kind: 'public' },
      responses: { 200: { description: 'The metadata', schema: metadataSchema } },
    })),
    {
      method: 'GET',
      path: '/.well-known/jwks.json',
      operationId: 'oauth.jwks',
      summary: 'The public keys that sign access tokens (RFC 7517)',
      description:
        'The keys that verify access tokens (RS256 JWTs, RFC 9068), by `kid`; a retired key stays listed while tokens it signed may still be live. Cached for 60 s: a verifier that meets an unknown `kid` fetches it again.',
      tag: 'OAuth',
      access: { kind: 'public' },
      responses: { 200: { description: 'The key set', schema: jwksSchema } },
    },
    {
      method: 'GET',
      path: '/oauth/authorize',
      operationId: 'oauth.authorize',
      summary: 'Authorization code request (RFC 6749 §4.1.1, PKCE S256)',
      description:
        'Starts the authorization-code grant for a client with a registered `redirect_uri`: redirects there with a one-time `code` (or an `error`), which the client exchanges at `/oauth/token` with the PKCE `code_verifier` whose S256 `code_challenge` it sent here. `state` comes back as it was sent.',
      tag: 'OAuth',
      access: { kind: 'public' },
      query: 'any',
      responses: {
        302: { description: 'Redirect to the registered URI with a code or an error', headers: ['Location'] },
        400: { description: 'A redirect_uri other than the registered one', schema: oauthErrorSchema },
        401: { description: 'Unknown client_id', schema: oauthErrorSchema },
      },
      errorFormat: 'oauth',
    },
    oauth(
      '/oauth/token',
      'oauth.token',
      [
        'Token request (RFC 6749 §3.2)',
        "Issues an access token (an RS256 JWT, RFC 9068, valid 10,800 s) for the `client_credentials`, `authorization_code` (with PKCE) or `refresh_token` grant; a refresh token is rotated: each use answers a new one, to keep in its place. `scope` narrows the client's scopes (`read`, `write`, `operations`). With a `DPoP` proof header (RFC 9449 §4), the access token is bound to the proof's key (`token_type: DPoP`, `cnf.jkt`) and is presented with the `DPoP` scheme and a proof per request; so are the refresh tokens of a grant begun with one. A client registered with `dpop_bound_access_tokens` must send a proof (else `invalid_dpop_proof`).",
      ],
      { request: tokenRequestSchema, response: tokenResponseSchema },
    ),
    oauth(
      '/oauth/revoke',
      'oauth.revoke',
      [
        'Token revocation (RFC 7009)',
        'Revokes an access or refresh token of the calling client, and the grant it belongs to: the API refuses its access tokens within 5 s. Answers 200 for a token it does not know too, as RFC 7009 asks.',
      ],
      { request: tokenParameterSchema },
    ),
    oauth(
      '/oauth/introspect',
      'oauth.introspect',
      [
        'Token introspection (RFC 7662)',
        'Whether a token of the calling client is active, and its scope, client, subject and expiry when it is; `{"active": false}` for any other token.',
      ],
      { request: tokenParameterSchema, response: introspectionSchema },
    ),
    // Served by the auth service because it owns organizations; the ingress routes this path here.
    {
      method: 'GET',
      path: '/v2/authenticate',
      operationId: 'authenticate',
      summary: 'Whether a token works, and for which organization',
      description:
        'Answers the organization a bearer token speaks for, or 401 when the token is missing, expired or revoked: the first call to make with new credentials. Any scope will do.',
      tag: 'Authentication',
      access: { kind: 'bearer', scopes: [] },
      responses: {
        200: { description: 'The organization the token speaks for', schema: authenticatedSchema },
      },
    },
  ];
}

/** The metadata's operations: at the issuer's well-known path, and at the one of its path (RFC 8414 §3). */
const METADATA_OPERATIONS = ['oauth.metadata', 'oauth.metadataForIssuerPath'] as const;

/** What serves {@link authRouteSpecs}, by operationId. */
export function authOperations(deps: AuthRoutesDeps): Operations {
  const metadata = JSON.stringify(authorizationServerMetadata(deps.issuer));
  const authorize = authorizeEndpoint(deps);
  const oauth = (handle: (request: ClientRequest) => Promise<Reply>): Operation<ClientRequest> => ({
    handle: (request) => handle(request.principal),
    renderError: oauthErrorReply,
  });
  const metadataOperation: Operation = {
    handle: () =>
      Promise.resolve({ status: 200, headers: { 'Cache-Control': 'public, max-age=300' }, body: metadata }),
  };
  return {
    ...Object.fromEntries(
      METADATA_OPERATIONS.slice(0, metadataPaths(deps.issuer).length).map((id) => [id, metadataOperation]),
    ),
    'oauth.jwks': {
      // Short-lived caching: verifiers refetch on an unknown kid and must then see a new key at once.
      handle: async () => jsonReply(200, await deps.keys.jwks(), { 'Cache-Control': 'public, max-age=60' }),
    },
    'oauth.authorize': { handle: (request) => authorize(request.url), renderError: oauthErrorReply },
    'oauth.token': oauth(tokenEndpoint(deps)),
    'oauth.revoke': oauth(revokeEndpoint(deps)),
    'oauth.introspect': oauth(introspectEndpoint(deps)),
    authenticate: {
      handle: (request: RouteRequest<AuthContext>) => authenticate(deps, request.principal),
    } satisfies Operation<AuthContext>,
  };
}

/** `GET /v2/authenticate` (API.md §7): whether a token works, and for which organization. */
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
