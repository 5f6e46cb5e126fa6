import type { IRouter } from 'express';
import { baseError, singleEnvelope } from '@ofp/contracts';
import { authOf, bearerChallenge, requireBearer, type TokenVerifier } from '@ofp/auth-tokens';
import type { Pool } from '@ofp/runtime';
import type { Grants } from './oauth/grants.js';

/**
 * `GET /v2/authenticate` (API.md §7): whether a token works, and for which organization. Served by
 * the auth service because it owns organizations; the ingress routes this path here.
 */
export function mountAuthenticateRoute(
  app: IRouter,
  deps: { pool: Pool; grants: Grants; verifier: TokenVerifier },
): void {
  app.get(['/v2/authenticate', '/api/v2/authenticate'], requireBearer(deps.verifier), async (req, res) => {
    const auth = authOf(req);
    const client = await deps.pool.connect();
    try {
      if (!(await deps.grants.accessTokenLive(client, auth.grantId, auth.tokenId))) {
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
      res.json(
        singleEnvelope({ message: `Successfully authenticated as ${organization.name}`, organization }),
      );
    } finally {
      client.release();
    }
  });
}
