import { randomBytes } from 'node:crypto';
import type { Clock, Scope } from '@ofp/auth-tokens';
import type { JSONWebKeySet } from 'jose';
import { baseError } from '@ofp/contracts';
import type { Pool, PoolClient } from '@ofp/runtime';
import type { Grants } from './oauth/grants.js';
import { digestSecret, newSecret } from './secrets.js';

export interface Organization {
  id: number;
  name: string;
  created_at: Date;
}

/** A client as the admin API shows it (API.md §10); never its secret, which only its digest keeps. */
export interface ClientRecord {
  client_id: string;
  organization_id: number;
  name: string;
  /** Absent for a client of the client-credentials grant alone. */
  redirect_uri: string | null;
  scopes: Scope[];
  created_at: Date;
  /** When it was disabled: it authenticates no more, and its grants were revoked then. */
  disabled_at: Date | null;
  /**
   * The public keys of a client that authenticates with `private_key_jwt` (RFC 7523), which has no
   * secret; null for a client with a secret.
   */
  jwks: JSONWebKeySet | null;
  /**
   * RFC 9449 §5.2: the client gets access tokens only with a DPoP proof, each bound to the proof's key
   * (and the refresh tokens of its grants as well).
   */
  dpop_bound_access_tokens: boolean;
}

/** A client with its secret: registration and rotation answer it, the only times it is shown. */
export interface RegisteredClient extends ClientRecord {
  client_secret: string;
}

/** Organizations by id, a page of them and how many there are. */
export async function listOrganizations(
  db: Db,
  page: { limit: number; offset: number },
): Promise<{ organizations: Organization[]; total: number }> {
  const { rows } = await db.query<Organization & { total: number }>(
    `SELECT id, name, created_at, count(*) OVER ()::int AS total
       FROM auth.organizations ORDER BY id LIMIT $1 OFFSET $2`,
    [page.limit, page.offset],
  );
  return {
    organizations: rows.map(({ total: _, ...organization }) => organization),
    total: await countOr(db, rows, 'SELECT count(*)::int AS n FROM auth.organizations', []),
  };
}

const CLIENT_COLUMNS =
  'id AS client_id, organization_id, name, redirect_uri, scopes, created_at, disabled_at, jwks, ' +
  'dpop_bound_access_tokens';

/** An organization's clients by creation, a page of them and how many there are. */
export async function listClients(
  db: Db,
  organizationId: number,
  page: { limit: number; offset: number },
): Promise<{ clients: ClientRecord[]; total: number }> {
  const { rows } = await db.query<ClientRecord & { total: number }>(
    `SELECT ${CLIENT_COLUMNS}, count(*) OVER ()::int AS total
       FROM auth.clients WHERE organization_id = $1 ORDER BY creation_order LIMIT $2 OFFSET $3`,
    [organizationId, page.limit, page.offset],
  );
  return {
    clients: rows.map(({ total: _, ...client }) => client),
    total: await countOr(db, rows, 'SELECT count(*)::int AS n FROM auth.clients WHERE organization_id = $1', [
      organizationId,
    ]),
  };
}

/** The total a windowed count gave, or (for a page past the end, which has no row to carry it) a count. */
async function countOr(
  db: Db,
  rows: readonly { total: number }[],
  countSql: string,
  params: readonly unknown[],
): Promise<number> {
  if (rows[0] !== undefined) return rows[0].total;
  const { rows: counted } = await db.query<{ n: number }>(countSql, [...params]);
  return counted[0]?.n ?? 0;
}

/**
 * Locks a client's row for the rest of the transaction: shared by the token grants (they check that
 * it is not disabled), exclusive by {@link disableClient}, so a grant made while the client is being
 * disabled is either revoked with the others or refused.
 */
export async function lockClient(
  tx: PoolClient,
  clientId: string,
  mode: 'share' | 'update',
): Promise<ClientRecord | undefined> {
  const { rows } = await tx.query<ClientRecord>(
    `SELECT ${CLIENT_COLUMNS} FROM auth.clients WHERE id = $1 FOR ${mode === 'share' ? 'SHARE' : 'UPDATE'}`,
    [clientId],
  );
  return rows[0];
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

interface NewClient {
  organizationId: number;
  name: string;
  redirectUri: string | null;
  scopes: readonly Scope[];
  dpopBoundAccessTokens: boolean;
}

/** Registers a client with a new id and secret; only the secret's digest is stored. */
export async function createClient(db: Db, clock: Clock, client: NewClient): Promise<RegisteredClient> {
  const clientSecret = newSecret();
  const record = await insertClient(db, clock, client, { secretHash: digestSecret(clientSecret) });
  return { ...record, client_secret: clientSecret };
}

/**
 * Registers a client of `private_key_jwt` (RFC 7523) with a new id and the public keys it signs its
 * assertions with; it has no secret.
 */
export async function createKeyedClient(
  db: Db,
  clock: Clock,
  client: NewClient & { jwks: JSONWebKeySet },
): Promise<ClientRecord> {
  return insertClient(db, clock, client, { jwks: client.jwks });
}

async function insertClient(
  db: Db,
  clock: Clock,
  client: NewClient,
  credential: { secretHash: Buffer } | { jwks: JSONWebKeySet },
): Promise<ClientRecord> {
  const clientId = randomBytes(16).toString('hex');
  const createdAt = clock();
  const jwks = 'jwks' in credential ? credential.jwks : null;
  await db.query(
    `INSERT INTO auth.clients (id, organization_id, name, redirect_uri, scopes, secret_hash, jwks, created_at,
                               dpop_bound_access_tokens)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [
      clientId,
      client.organizationId,
      client.name,
      client.redirectUri,
      client.scopes,
      'secretHash' in credential ? credential.secretHash : null,
      jwks,
      createdAt,
      client.dpopBoundAccessTokens,
    ],
  );
  return {
    client_id: clientId,
    organization_id: client.organizationId,
    name: client.name,
    redirect_uri: client.redirectUri,
    scopes: [...client.scopes],
    created_at: createdAt,
    disabled_at: null,
    jwks,
    dpop_bound_access_tokens: client.dpopBoundAccessTokens,
  };
}

/**
 * Replaces the public keys of a `private_key_jwt` client (its key rotation: publish the new key with
 * the old, then the new alone). Assertions signed by a key no longer listed are refused at once.
 */
export async function replaceClientKeys(
  tx: PoolClient,
  clientId: string,
  jwks: JSONWebKeySet,
): Promise<ClientRecord> {
  const client = await lockClient(tx, clientId, 'update');
  if (client === undefined) throw baseError('NotFound', `Client ${clientId} not found`);
  if (client.jwks === null)
    throw baseError('Conflict', `Client ${clientId} authenticates with a secret, not with keys`);
  await tx.query('UPDATE auth.clients SET jwks = $2 WHERE id = $1', [clientId, jwks]);
  return { ...client, jwks };
}

/**
 * Gives a client a new secret; the old one stops working at once. The standalone demo client's
 * readable copy (`auth.demo_tenant`) follows, so the start-up banner shows the secret that works.
 */
export async function rotateClientSecret(tx: PoolClient, clientId: string): Promise<RegisteredClient> {
  const client = await lockClient(tx, clientId, 'update');
  if (client === undefined) throw baseError('NotFound', `Client ${clientId} not found`);
  if (client.disabled_at !== null) throw baseError('Conflict', `Client ${clientId} is disabled`);
  if (client.jwks !== null)
    throw baseError('Conflict', `Client ${clientId} authenticates with private_key_jwt: it has no secret`);
  const clientSecret = newSecret();
  await tx.query('UPDATE auth.clients SET secret_hash = $2 WHERE id = $1', [
    clientId,
    digestSecret(clientSecret),
  ]);
  await tx.query('UPDATE auth.demo_tenant SET client_secret = $2 WHERE client_id = $1', [
    clientId,
    clientSecret,
  ]);
  return { ...client, client_secret: clientSecret };
}

/**
 * Disables a client: it authenticates no more, every grant it holds is revoked as a reused refresh
 * token's is, and its client-credentials tokens (stored nowhere) are denied by client (API.md §7: its
 * access tokens fail everywhere within 5 s). Disabling a disabled client changes nothing.
 */
export async function disableClient(
  tx: PoolClient,
  clock: Clock,
  grants: Pick<Grants, 'revoke' | 'revokeClient'>,
  clientId: string,
): Promise<{ client: ClientRecord; revokedGrants: number }> {
  const client = await lockClient(tx, clientId, 'update');
  if (client === undefined) throw baseError('NotFound', `Client ${clientId} not found`);
  if (client.disabled_at !== null) return { client, revokedGrants: 0 };
  const disabledAt = clock();
  await tx.query('UPDATE auth.clients SET disabled_at = $2 WHERE id = $1', [clientId, disabledAt]);
  const { rows } = await tx.query<{ id: string }>(
    'SELECT id FROM auth.grants WHERE client_id = $1 AND revoked_at IS NULL ORDER BY id',
    [clientId],
  );
  for (const { id } of rows) await grants.revoke(tx, id);
  await grants.revokeClient(tx, clientId);
  return { client: { ...client, disabled_at: disabledAt }, revokedGrants: rows.length };
}
