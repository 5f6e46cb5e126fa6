import type { IRouter } from 'express';
import { rateLimit, type Clock, type TokenBucketLimiter, type TokenVerifier } from '@ofp/auth-tokens';
import type { Pool } from '@ofp/runtime';
import type { SigningKeys } from '../signing-keys.js';
import { authorizeEndpoint } from './authorize.js';
import { authenticateClient, clientOf } from './client-auth.js';
import { oauthErrorHandler } from './errors.js';
import { parseForm } from './form.js';
import type { Grants } from './grants.js';
import { authorizationServerMetadata, metadataPaths } from './metadata.js';
import { introspectEndpoint, revokeEndpoint } from './revoke-introspect.js';
import { tokenEndpoint } from './token.js';

export interface OAuthRoutesDeps {
  pool: Pool;
  clock: Clock;
  issuer: string;
  keys: SigningKeys;
  grants: Grants;
  limiter: TokenBucketLimiter;
  /** Verifies this service's own access tokens for revocation and introspection. */
  verifier: TokenVerifier;
}

/** Mounts the OAuth endpoints of API.md §7 and their RFC 6749 §5.2 error responses. */
export function mountOAuthRoutes(app: IRouter, deps: OAuthRoutesDeps): void {
  const metadata = authorizationServerMetadata(deps.issuer);
  app.get(metadataPaths(deps.issuer), (_req, res) => {
    res.set('Cache-Control', 'public, max-age=300').json(metadata);
  });
  app.get('/.well-known/jwks.json', async (_req, res) => {
    // Short-lived caching: verifiers refetch on an unknown kid and must then see a new key at once.
    res.set('Cache-Control', 'public, max-age=60').json(await deps.keys.jwks());
  });

  app.get('/oauth/authorize', authorizeEndpoint(deps));
  // Client-authenticated endpoints draw from the authenticated client's bucket: keyed by a client_id
  // before authentication, anyone could drain another client's bucket.
  const clientRequest = [
    parseForm,
    authenticateClient(deps.pool),
    rateLimit({ limiter: deps.limiter, key: (_req, res) => `client:${clientOf(res.locals).id}` }),
  ];
  app.post('/oauth/token', ...clientRequest, tokenEndpoint(deps));
  app.post('/oauth/revoke', ...clientRequest, revokeEndpoint(deps));
  app.post('/oauth/introspect', ...clientRequest, introspectEndpoint(deps));
  app.use('/oauth', oauthErrorHandler);
}
