import { z } from 'zod';
import { SCOPES } from '@ofp/auth-tokens';
import { singleEnvelopeOf } from '@ofp/contracts';
import { ACCESS_TOKEN_TTL_SECONDS } from './token-lifetime.js';

// The schemas of the auth service's requests and answers, for the published description (API.md §7,
// §10, §11); the handlers check the same parameters as RFC 6749, 7009 and 7662 prescribe.

/** RFC 6749 §5.2 (and §4.1.2.1, RFC 7009 §2.2.1): what an OAuth endpoint answers on error. */
export const oauthErrorSchema = z
  .strictObject({
    error: z.enum([
      'invalid_request',
      'invalid_client',
      'invalid_grant',
      'unauthorized_client',
      'unsupported_grant_type',
      'unsupported_response_type',
      'invalid_scope',
      'unsupported_token_type',
      'invalid_dpop_proof',
      'slow_down',
    ]),
    error_description: z.string(),
  })
  .meta({ id: 'OAuthError' });

const scopeList = z.string().describe(`Space-separated scopes: ${SCOPES.join(', ')}`);

/** `POST /oauth/token` (RFC 6749 §3.2, §4.1.3, §4.4, §6; RFC 7636 §4.5). */
export const tokenRequestSchema = z
  .object({
    grant_type: z.enum(['authorization_code', 'refresh_token', 'client_credentials']),
    code: z.string().optional(),
    redirect_uri: z.string().optional(),
    code_verifier: z.string().optional(),
    refresh_token: z.string().optional(),
    scope: scopeList.optional(),
    client_id: z.string().optional(),
    client_secret: z.string().optional(),
    client_assertion_type: z
      .literal('urn:ietf:params:oauth:client-assertion-type:jwt-bearer')
      .optional()
      .describe('private_key_jwt (RFC 7523 §2.2), with client_assertion'),
    client_assertion: z.string().optional().describe('A JWT signed by a key of the client’s JWKS'),
  })
  .meta({ id: 'TokenRequest' });

/** RFC 6749 §5.1, API.md §7. */
export const tokenResponseSchema = z
  .strictObject({
    access_token: z.string(),
    token_type: z
      .enum(['bearer', 'DPoP'])
      .describe('`DPoP` for a token bound to the key of the request’s DPoP proof (RFC 9449 §5)'),
    expires_in: z.literal(ACCESS_TOKEN_TTL_SECONDS),
    refresh_token: z
      .string()
      .optional()
      .describe('The authorization code and refresh token grants; none for client credentials'),
    scope: scopeList,
  })
  .meta({ id: 'TokenResponse' });

/** `POST /oauth/revoke` (RFC 7009 §2.1) and `POST /oauth/introspect` (RFC 7662 §2.1). */
export const tokenParameterSchema = z
  .object({
    token: z.string(),
    token_type_hint: z.enum(['access_token', 'refresh_token']).optional(),
    client_id: z.string().optional(),
    client_secret: z.string().optional(),
  })
  .meta({ id: 'TokenParameter' });

/** RFC 7662 §2.2: `active` alone for a token that is not the client's or not active. */
export const introspectionSchema = z
  .strictObject({
    active: z.boolean(),
    scope: scopeList.optional(),
    client_id: z.string().optional(),
    sub: z.string().optional(),
    org: z.int().optional(),
    iss: z.string().optional(),
    aud: z.string().optional(),
    exp: z.int().optional(),
    iat: z.int().optional(),
    token_type: z.enum(['bearer', 'DPoP']).optional(),
    jti: z.string().optional(),
    cnf: z
      .strictObject({ jkt: z.string() })
      .optional()
      .describe('The DPoP key a DPoP-bound token is bound to, by its RFC 7638 thumbprint (RFC 9449 §6.2)'),
  })
  .meta({ id: 'Introspection' });

/** RFC 7517: the public keys access tokens are signed with. */
export const jwksSchema = z
  .strictObject({
    keys: z.array(
      z.strictObject({
        kty: z.literal('RSA'),
        kid: z.string(),
        use: z.literal('sig'),
        alg: z.literal('RS256'),
        n: z.string(),
        e: z.string(),
      }),
    ),
  })
  .meta({ id: 'JsonWebKeySet' });

/** RFC 8414 §2. */
export const metadataSchema = z
  .looseObject({ issuer: z.string() })
  .meta({ id: 'AuthorizationServerMetadata' });

/** `GET /v2/authenticate` (API.md §7). */
export const authenticatedSchema = singleEnvelopeOf(
  z.strictObject({
    message: z.string(),
    organization: z.strictObject({ id: z.int(), name: z.string() }),
  }),
  'AuthenticatedEnvelope',
);

/** An organization (API.md §10). */
export const organizationSchema = singleEnvelopeOf(
  z
    .strictObject({ id: z.int(), name: z.string(), created_at: z.iso.datetime() })
    .meta({ id: 'Organization' }),
  'OrganizationEnvelope',
);

/** A registered client, its secret shown this once (API.md §10). */
export const registeredClientSchema = singleEnvelopeOf(
  z
    .strictObject({
      client_id: z.string(),
      client_secret: z.string().optional().describe('None for a client registered with `jwks`'),
      organization_id: z.int(),
      name: z.string(),
      redirect_uri: z.string(),
      scopes: z.array(z.enum(SCOPES)),
      created_at: z.iso.datetime(),
      disabled_at: z.iso.datetime().nullable(),
      jwks: z
        .looseObject({ keys: z.array(z.looseObject({ kty: z.string() })) })
        .nullable()
        .describe('The public keys of a private_key_jwt client (RFC 7523); null for a client with a secret'),
      dpop_bound_access_tokens: z
        .boolean()
        .describe(
          'RFC 9449 §5.2: the client gets tokens only with a DPoP proof, bound to its key (cnf.jkt), and presents them with the DPoP scheme',
        ),
    })
    .meta({ id: 'RegisteredClient' }),
  'RegisteredClientEnvelope',
);
