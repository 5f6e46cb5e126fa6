import type { RequestHandler } from 'express';
import type { Pool } from '@ofp/runtime';
import type { Scope } from '@ofp/auth-tokens';
import { digestSecret, secretMatches } from '../secrets.js';
import { OAuthError } from './errors.js';
import { formOf, type OAuthParams } from './form.js';

/** A registered client, as the OAuth endpoints need it. */
export interface Client {
  id: string;
  organizationId: number;
  redirectUri: string;
  scopes: Scope[];
}

declare module 'express-serve-static-core' {
  interface Locals {
    /** The client that authenticated the request ({@link authenticateClient}). */
    client?: Client;
  }
}

/** Credentials a client presented, and how (RFC 6749 §2.3.1). */
export type PresentedCredentials =
  | { method: 'client_secret_basic' | 'client_secret_post'; clientId: string; clientSecret: string }
  | { method: 'none' };

/** RFC 6749 §5.2: an `invalid_client` after Basic authentication must carry this challenge. */
export const BASIC_CHALLENGE = { 'WWW-Authenticate': 'Basic realm="oauth", charset="UTF-8"' } as const;

/**
 * Reads client credentials from HTTP Basic or from the body (RFC 6749 §2.3.1). Using both is an
 * `invalid_request` (§2.3: one method per request). Basic credentials are form-urlencoded before base64
 * encoding (§2.3.1), so they are decoded twice.
 */
export function presentedCredentials(
  authorization: string | undefined,
  form: OAuthParams,
): PresentedCredentials {
  const bodySecret = form.get('client_secret');
  if (authorization !== undefined && /^Basic /i.test(authorization)) {
    if (bodySecret !== undefined) {
      throw new OAuthError('invalid_request', 'Use one client authentication method, not two');
    }
    const decoded = Buffer.from(authorization.slice(6).trim(), 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    const basicFailure = new OAuthError(
      'invalid_client',
      'Malformed Basic credentials',
      401,
      BASIC_CHALLENGE,
    );
    if (colon < 0) throw basicFailure;
    let clientId: string;
    let clientSecret: string;
    try {
      clientId = formDecode(decoded.slice(0, colon));
      clientSecret = formDecode(decoded.slice(colon + 1));
    } catch {
      throw basicFailure;
    }
    const bodyId = form.get('client_id');
    if (bodyId !== undefined && bodyId !== clientId) {
      throw new OAuthError('invalid_request', 'client_id differs from the Basic credentials');
    }
    return { method: 'client_secret_basic', clientId, clientSecret };
  }
  const clientId = form.get('client_id');
  if (clientId !== undefined && bodySecret !== undefined) {
    return { method: 'client_secret_post', clientId, clientSecret: bodySecret };
  }
  return { method: 'none' };
}

function formDecode(value: string): string {
  return decodeURIComponent(value.replace(/\+/g, ' '));
}

// Compared against when the client does not exist, so that an unknown id costs the same as a wrong secret.
const NO_SECRET = digestSecret('');

/** Looks the client up and checks its secret; any failure is the same `invalid_client`. */
export async function verifyClient(pool: Pool, credentials: PresentedCredentials): Promise<Client> {
  const challenge = credentials.method === 'client_secret_basic' ? BASIC_CHALLENGE : {};
  if (credentials.method === 'none') {
    throw new OAuthError('invalid_client', 'Client authentication is required', 401, challenge);
  }
  const { rows } = await pool.query<{
    id: string;
    organization_id: number;
    redirect_uri: string;
    scopes: Scope[];
    secret_hash: Buffer;
  }>('SELECT id, organization_id, redirect_uri, scopes, secret_hash FROM auth.clients WHERE id = $1', [
    credentials.clientId,
  ]);
  const row = rows[0];
  const matches = secretMatches(credentials.clientSecret, row?.secret_hash ?? NO_SECRET);
  if (row === undefined || !matches) {
    throw new OAuthError('invalid_client', 'Client authentication failed', 401, challenge);
  }
  return {
    id: row.id,
    organizationId: row.organization_id,
    redirectUri: row.redirect_uri,
    scopes: row.scopes,
  };
}

/** Authenticates the client of a form request (after `parseForm`) into `res.locals.client`. */
export function authenticateClient(pool: Pool): RequestHandler {
  return async (req, res, next) => {
    res.locals.client = await verifyClient(
      pool,
      presentedCredentials(req.get('authorization'), formOf(res.locals)),
    );
    next();
  };
}

/** The authenticated client of a request behind {@link authenticateClient}. */
export function clientOf(locals: { client?: Client }): Client {
  if (locals.client === undefined) throw new Error('authenticateClient must run before this handler');
  return locals.client;
}
