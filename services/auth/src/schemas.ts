import { z } from 'zod';
import { SCOPES } from '@ofp/auth-tokens';
import { singleEnvelopeOf } from '@ofp/contracts';
import { authorizationServerMetadata } from './oauth/metadata.js';
import { ACCESS_TOKEN_TTL_SECONDS } from './token-lifetime.js';

// The schemas of the auth service's requests and answers, for the published description (API.md §7,
// §10, §11); the handlers check the same parameters as RFC 6749, 7009 and 7662 prescribe.

/** RFC 6749 §5.2 (and §4.1.2.1, RFC 7009 §2.2.1): what an OAuth endpoint answers on error. */
export const oauthErrorSchema = z
  .strictObject({
    error: z
      .enum([
        'invalid_request',
        'invalid_client',
        'invalid_grant',
        'unauthorized_client',
        'unsupported_grant_type',
        'unsupported_response_type',
        'invalid_scope',
        'unsupported_token_type',
        'invalid_dpop_proof',
        'use_dpop_nonce',
        'slow_down',
      ])
      .describe('The RFC 6749 §5.2 error code'),
    error_description: z.string().describe('What was wrong, in words'),
  })
  .meta({
    id: 'OAuthError',
    examples: [
      { error: 'invalid_grant', error_description: 'The refresh token is unknown, expired or revoked' },
    ],
  });

const scopeList = z.string().describe(`Space-separated scopes: ${SCOPES.join(', ')}`);

/** `POST /oauth/token` (RFC 6749 §3.2, §4.1.3, §4.4, §6; RFC 7636 §4.5). */
export const tokenRequestSchema = z
  .object({
    grant_type: z
      .enum(['authorization_code', 'refresh_token', 'client_credentials'])
      .describe('The grant: a code from /oauth/authorize, a refresh token, or the client itself'),
    code: z.string().optional().describe('authorization_code: the code the redirect carried (valid once)'),
    redirect_uri: z
      .string()
      .optional()
      .describe('authorization_code: the redirect_uri the code was asked with'),
    code_verifier: z
      .string()
      .optional()
      .describe('authorization_code: the PKCE verifier of the code_challenge (RFC 7636)'),
    refresh_token: z.string().optional().describe('refresh_token: the refresh token to exchange'),
    scope: scopeList.optional(),
    client_id: z.string().optional().describe('The client, when not authenticated with HTTP Basic'),
    client_secret: z
      .string()
      .optional()
      .describe("The client's secret, when not authenticated with HTTP Basic"),
    client_assertion_type: z
      .literal('urn:ietf:params:oauth:client-assertion-type:jwt-bearer')
      .optional()
      .describe('private_key_jwt (RFC 7523 §2.2), with client_assertion'),
    client_assertion: z.string().optional().describe('A JWT signed by a key of the client’s JWKS'),
  })
  .meta({
    id: 'TokenRequest',
    examples: [{ grant_type: 'client_credentials', scope: 'read write' }],
  });

/** RFC 6749 §5.1, API.md §7. */
export const tokenResponseSchema = z
  .strictObject({
    access_token: z
      .string()
      .describe('An RS256 JWT (RFC 9068), sent as `Authorization: Bearer <token>` (or `DPoP <token>`)'),
    token_type: z
      .enum(['bearer', 'DPoP'])
      .describe('`DPoP` for a token bound to the key of the request’s DPoP proof (RFC 9449 §5)'),
    expires_in: z.literal(ACCESS_TOKEN_TTL_SECONDS).describe('Seconds the access token is valid'),
    refresh_token: z
      .string()
      .optional()
      .describe('The authorization code and refresh token grants; none for client credentials'),
    scope: scopeList,
  })
  .meta({
    id: 'TokenResponse',
    examples: [
      {
        access_token:
          'eyJhbGciOiJSUzI1NiIsInR5cCI6ImF0K2p3dCIsImtpZCI6ImtleS0yMDI2LTExIn0.eyJpc3MiOiJodHRwczovL2FwaS5leGFtcGxlLmNvbSIsInN1YiI6IjRmOGMyZTkxIiwiY2xpZW50X2lkIjoiNGY4YzJlOTEiLCJhdWQiOiJodHRwczovL2FwaS5leGFtcGxlLmNvbSIsIm9yZyI6MTcsInNjb3BlIjoicmVhZCB3cml0ZSIsImp0aSI6IjljMWQiLCJpYXQiOjE3OTYxMTM4MDAsImV4cCI6MTc5NjEyNDYwMH0.c2lnbmF0dXJl',
        token_type: 'bearer',
        expires_in: ACCESS_TOKEN_TTL_SECONDS,
        scope: 'read write',
      },
    ],
  });

/** `POST /oauth/revoke` (RFC 7009 §2.1) and `POST /oauth/introspect` (RFC 7662 §2.1). */
export const tokenParameterSchema = z
  .object({
    token: z.string().describe('The access or refresh token'),
    token_type_hint: z
      .enum(['access_token', 'refresh_token'])
      .optional()
      .describe('Which kind `token` is, to look it up first'),
    client_id: z.string().optional().describe('The client, when not authenticated with HTTP Basic'),
    client_secret: z
      .string()
      .optional()
      .describe("The client's secret, when not authenticated with HTTP Basic"),
  })
  .meta({
    id: 'TokenParameter',
    examples: [{ token: 'q0xVb3s6N1zJk8rW2dYt5uHc7LmP9aEf4gR0iKo3wTs', token_type_hint: 'refresh_token' }],
  });

/** RFC 7662 §2.2: `active` alone for a token that is not the client's or not active. */
export const introspectionSchema = z
  .strictObject({
    active: z.boolean().describe('Whether the token is valid now; false says nothing more'),
    scope: scopeList.optional(),
    client_id: z.string().optional().describe('The client the token was issued to'),
    sub: z.string().optional().describe('The subject: the user, or the client for client credentials'),
    org: z.int().optional().describe("The organization's id"),
    iss: z.string().optional().describe('The issuer (PUBLIC_URL)'),
    aud: z.string().optional().describe('The audience'),
    exp: z.int().optional().describe('When it expires, in Unix seconds'),
    iat: z.int().optional().describe('When it was issued, in Unix seconds'),
    token_type: z.enum(['bearer', 'DPoP']).optional().describe('`DPoP` for a DPoP-bound token'),
    jti: z.string().optional().describe("The token's id"),
    cnf: z
      .strictObject({ jkt: z.string().describe('The JWK SHA-256 thumbprint (RFC 7638), base64url') })
      .optional()
      .describe('The DPoP key a DPoP-bound token is bound to, by its RFC 7638 thumbprint (RFC 9449 §6.2)'),
  })
  .meta({
    id: 'Introspection',
    examples: [
      {
        active: true,
        scope: 'read write',
        client_id: '4f8c2e91',
        sub: '4f8c2e91',
        org: 17,
        iss: 'https://api.example.com',
        aud: 'https://api.example.com',
        exp: 1796124600,
        iat: 1796113800,
        token_type: 'bearer',
        jti: '9c1d6a0e-4b7f-4c52-9a51-2f0d3e8b7c16',
      },
      { active: false },
    ],
  });

/** RFC 7517: the public keys access tokens are signed with. */
export const jwksSchema = z
  .strictObject({
    keys: z
      .array(
        z.strictObject({
          kty: z.literal('RSA').describe('Key type'),
          kid: z.string().describe('Key id, named by the `kid` header of the tokens it signs'),
          use: z.literal('sig').describe('Used for signatures'),
          alg: z.literal('RS256').describe('Signature algorithm'),
          n: z.string().describe('RSA modulus, base64url'),
          e: z.string().describe('RSA public exponent, base64url'),
        }),
      )
      .describe('The keys access tokens are signed with, including any whose tokens may still be valid'),
  })
  .meta({
    id: 'JsonWebKeySet',
    examples: [
      {
        keys: [
          {
            kty: 'RSA',
            kid: 'key-2026-11',
            use: 'sig',
            alg: 'RS256',
            n: 'u1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0_IzW7yWR7QkrmBL7jTKEn5u-qKhbwKfBstIs-bMY2Zkp18gnTxKLxoS2tFczGkPLPgizskuemMghRniWaoLcyehkd3qqGElvW_VDL5AaWTg0nLVkjRo9z-40RQzuVaE8AkAFmxZzow3x-VJYKdjykkJ0iT9wCS0DRTXu269V264Vf_3jvredZiKRkgwlL9xNAwxXFg0x_XFw005UWVRIkdgcKWTjpBP2dPwVZ4WWC-9aGVd-Gyn1o0CLelf4rEjGoXbAAEgAqeGUxrcIlbjXfbcmw',
            e: 'AQAB',
          },
        ],
      },
    ],
  });

/** RFC 8414 §2. */
export const metadataSchema = z
  .looseObject({ issuer: z.string().describe('The issuer identifier (PUBLIC_URL)') })
  .meta({
    id: 'AuthorizationServerMetadata',
    examples: [authorizationServerMetadata('https://api.example.com')],
  });

/** `GET /v2/authenticate` (API.md §7). */
export const authenticatedSchema = singleEnvelopeOf(
  z
    .strictObject({
      message: z.string().describe('A greeting that confirms the token works'),
      organization: z
        .strictObject({
          id: z.int().describe("The organization's id"),
          name: z.string().describe("The organization's name"),
        })
        .describe("The token's organization"),
    })
    .meta({
      examples: [
        {
          message: 'Successfully authenticated as Acme Retail',
          organization: { id: 17, name: 'Acme Retail' },
        },
      ],
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
