import { z } from 'zod';
import { SCOPES, type Clock } from '@ofp/auth-tokens';
import { baseError, DomainError, singleEnvelope, type FieldErrors } from '@ofp/contracts';
import { jsonReply, type Pool, type Route } from '@ofp/runtime';
import type { SigningKeys } from '../signing-keys.js';
import { createClient, createOrganization, organizationExists } from '../tenants.js';
import { adminAccess } from './admin-token.js';

export interface AdminRoutesDeps {
  pool: Pool;
  clock: Clock;
  keys: SigningKeys;
  adminToken: string;
}

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * An absolute URI without fragment (RFC 6749 §3.1.2), https, or http on a loopback host only (RFC 8252
 * §7.3; RFC 9700 §4.1.1 forbids other cleartext redirects).
 */
function isAcceptableRedirectUri(value: string): boolean {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return false;
  }
  if (url.hash !== '' || value.includes('#')) return false;
  return url.protocol === 'https:' || (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname));
}

const name = z
  .string({ error: (issue) => (issue.input === undefined ? 'is required' : 'must be a string') })
  .trim()
  .min(1, 'must not be empty')
  .max(200, 'must be at most 200 characters');

const organizationInput = z.object({ name });

const clientInput = z.object({
  name,
  redirect_uri: z
    .string({ error: (issue) => (issue.input === undefined ? 'is required' : 'must be a string') })
    .refine(
      isAcceptableRedirectUri,
      'must be an absolute https URI (http only on localhost) without fragment',
    ),
  scopes: z
    .array(z.enum(SCOPES, `must be one of ${SCOPES.join(', ')}`), {
      error: (issue) => (issue.input === undefined ? 'is required' : 'must be an array'),
    })
    .min(1, 'must name at least one scope')
    .refine((scopes) => new Set(scopes).size === scopes.length, 'must not repeat a scope'),
});

/** Column errors for the envelope (API.md §2: nested columns named by path, `scopes[1]`). */
function columnErrors(error: z.ZodError): FieldErrors {
  const errors: FieldErrors = {};
  for (const issue of error.issues) {
    const column =
      issue.path
        .map((part, i) => (typeof part === 'number' ? `[${part}]` : `${i === 0 ? '' : '.'}${String(part)}`))
        .join('') || 'base';
    (errors[column] ??= []).push(issue.message);
  }
  return errors;
}

function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw new DomainError('Unprocessable', columnErrors(parsed.error));
  return parsed.data;
}

/** The administration API of API.md §10, guarded by the deployment's admin token. */
export function adminRoutes(deps: AdminRoutesDeps): Route[] {
  const access = adminAccess(deps.adminToken);
  const admin = (route: Omit<Route<undefined>, 'access' | 'tag'>): Route<undefined> => ({
    ...route,
    access,
    tag: 'Administration',
  });
  return [
    admin({
      method: 'POST',
      path: '/admin/organizations',
      operationId: 'admin.createOrganization',
      summary: 'Create an organization',
      body: 'json',
      request: organizationInput,
      responses: { 201: { description: 'The organization' } },
      errors: [415, 422],
      handle: async (request) => {
        const input = parseBody(organizationInput, request.body);
        const organization = await createOrganization(deps.pool, deps.clock, input.name);
        return jsonReply(201, singleEnvelope(organization));
      },
    }),
    admin({
      method: 'POST',
      path: '/admin/organizations/{id}/clients',
      operationId: 'admin.createClient',
      summary: 'Register a client of an organization (its secret is shown this once)',
      body: 'json',
      request: clientInput,
      responses: { 201: { description: 'The client with its secret' } },
      errors: [404, 415, 422],
      handle: async (request) => {
        const given = request.params.id ?? '';
        const id = /^[1-9]\d{0,15}$/.test(given) ? Number(given) : undefined;
        if (id === undefined || !(await organizationExists(deps.pool, id))) {
          throw baseError('NotFound', `Organization ${given} not found`);
        }
        const input = parseBody(clientInput, request.body);
        const client = await createClient(deps.pool, deps.clock, {
          organizationId: id,
          name: input.name,
          redirectUri: input.redirect_uri,
          scopes: input.scopes,
        });
        // The secret is shown this once; nothing on the way may keep a copy.
        return jsonReply(201, singleEnvelope(client), { 'Cache-Control': 'no-store' });
      },
    }),
    admin({
      method: 'POST',
      path: '/admin/signing_keys/rotate',
      operationId: 'admin.rotateSigningKey',
      summary: 'Rotate the token signing key (live tokens stay valid)',
      responses: { 201: { description: 'The new key id and the retired one' } },
      handle: async () => {
        const rotated = await deps.keys.rotate();
        return jsonReply(201, singleEnvelope({ kid: rotated.kid, retired_kid: rotated.retiredKid ?? null }));
      },
    }),
  ];
}
