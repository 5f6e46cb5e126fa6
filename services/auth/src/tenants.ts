import { randomBytes } from 'node:crypto';
import type { Clock, Scope } from '@ofp/auth-tokens';
import type { Pool, PoolClient } from '@ofp/runtime';
import { digestSecret, newSecret } from './secrets.js';

export interface Organization {
  id: number;
  name: string;
  created_at: Date;
}

/** A client as registration returns it: the only time its secret is shown (API.md §10). */
export interface RegisteredClient {
  client_id: string;
  client_secret: string;
  organization_id: number;
  name: string;
  redirect_uri: string;
  scopes: Scope[];
  created_at: Date;
}

type Db = Pick<Pool | PoolClient, 'query'>;

export async function createOrganization(db: Db, clock: Clock, name: string): Promise<Organization> {
  const { rows } = await db.query<Organization>(
    'INSERT INTO auth.organizations (name, created_at) VALUES ($1, $2) RETURNING id, name, created_at',
    [name, clock()],
  );
  return rows[0]!;
}

export async function organizationExists(db: Db, id: number): Promise<boolean> {
  const { rows } = await db.query('SELECT 1 FROM auth.organizations WHERE id = $1', [id]);
  return rows.length > 0;
}

/** Registers a client with a new id and secret; only the secret's digest is stored. */
export async function createClient(
  db: Db,
  clock: Clock,
  client: { organizationId: number; name: string; redirectUri: string; scopes: readonly Scope[] },
): Promise<RegisteredClient> {
  const clientId = randomBytes(16).toString('hex');
  const clientSecret = newSecret();
  const createdAt = clock();
  await db.query(
    `INSERT INTO auth.clients (id, organization_id, name, redirect_uri, scopes, secret_hash, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [
      clientId,
      client.organizationId,
      client.name,
      client.redirectUri,
      client.scopes,
      digestSecret(clientSecret),
      createdAt,
    ],
  );
  return {
    client_id: clientId,
    client_secret: clientSecret,
    organization_id: client.organizationId,
    name: client.name,
    redirect_uri: client.redirectUri,
    scopes: [...client.scopes],
    created_at: createdAt,
  };
}
