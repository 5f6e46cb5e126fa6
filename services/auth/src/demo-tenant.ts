import { SCOPES, type Clock, type Scope } from '@ofp/auth-tokens';
import { inTransaction, type Pool } from '@ofp/runtime';
import { createClient, createOrganization } from './tenants.js';

export interface DemoTenant {
  organization: { id: number; name: string };
  clientId: string;
  clientSecret: string;
  redirectUri: string;
  scopes: Scope[];
  /** Whether this call created it (first start) or found it. */
  created: boolean;
  /** Whether an operator disabled it (its credentials no longer work). */
  disabled: boolean;
}

export const DEMO_ORGANIZATION_NAME = 'Demo organization';
export const DEMO_REDIRECT_URI = 'http://localhost:3000/callback';

/**
 * The standalone runner's demo organization and client (all scopes), created on first start and the
 * same on every later start against the same database. The client's secret is stored hashed like any
 * other in `auth.clients`, and readable in `auth.demo_tenant` so the runner can print it again: the
 * credentials live and die with the database they work against, not with a file beside it.
 */
export async function ensureDemoTenant(
  deps: { pool: Pool; clock: Clock },
  options: { redirectUri?: string } = {},
): Promise<DemoTenant> {
  return inTransaction(deps.pool, async (tx) => {
    // Two processes starting on one database at once create one tenant.
    await tx.query("SELECT pg_advisory_xact_lock(hashtext('ofp:auth:demo_tenant'))");
    const { rows } = await tx.query<{
      organization_id: number;
      organization_name: string;
      client_id: string;
      client_secret: string;
      redirect_uri: string;
      scopes: Scope[];
      disabled: boolean;
    }>(
      `SELECT o.id AS organization_id, o.name AS organization_name, c.id AS client_id, d.client_secret,
              c.redirect_uri, c.scopes, c.disabled_at IS NOT NULL AS disabled
         FROM auth.demo_tenant d
         JOIN auth.clients c ON c.id = d.client_id
         JOIN auth.organizations o ON o.id = c.organization_id`,
    );
    const found = rows[0];
    if (found !== undefined) {
      return {
        organization: { id: found.organization_id, name: found.organization_name },
        clientId: found.client_id,
        clientSecret: found.client_secret,
        redirectUri: found.redirect_uri,
        scopes: found.scopes,
        created: false,
        disabled: found.disabled,
      };
    }
    const organization = await createOrganization(tx, deps.clock, DEMO_ORGANIZATION_NAME);
    const redirectUri = options.redirectUri ?? DEMO_REDIRECT_URI;
    const client = await createClient(tx, deps.clock, {
      organizationId: organization.id,
      name: 'Demo client',
      redirectUri,
      scopes: SCOPES,
      dpopBoundAccessTokens: false,
    });
    await tx.query('INSERT INTO auth.demo_tenant (client_id, client_secret) VALUES ($1, $2)', [
      client.client_id,
      client.client_secret,
    ]);
    return {
      organization: { id: organization.id, name: organization.name },
      clientId: client.client_id,
      clientSecret: client.client_secret,
      redirectUri,
      scopes: client.scopes,
      created: true,
      disabled: false,
    };
  });
}
