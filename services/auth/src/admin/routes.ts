import { createPublicKey } from 'node:crypto';
import type { JSONWebKeySet } from 'jose';
import { z } from 'zod';
import { SCOPES, type Clock } from '@ofp/auth-tokens';
import {
  baseError,
  DomainError,
  fieldError,
  searchEnvelope,
  singleEnvelope,
  type FieldErrors,
} from '@ofp/contracts';
import { ParkedEvents, type ParkedEvent } from '@ofp/event-store';
import { inTransaction, type Pool } from '@ofp/runtime';
import { jsonReply, type Operation, type Operations, type RouteRequest, type RouteSpec } from '@ofp/http-api';
import type { Grants } from '../oauth/grants.js';
import type { SigningKeys } from '../signing-keys.js';
import { organizationSchema, registeredClientSchema } from '../schemas.js';
import {
  createClient,
  createKeyedClient,
  createOrganization,
  disableClient,
  listClients,
  listOrganizations,
  organizationExists,
  replaceClientKeys,
  rotateClientSecret,
} from '../tenants.js';

export interface AdminRoutesDeps {
  pool: Pool;
  clock: Clock;
  keys: SigningKeys;
  /** Revokes a disabled client's grants and tokens. */
  grants: Pick<Grants, 'revoke' | 'revokeClient'>;
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

/** Members of a JWK that only a private or secret key has (RFC 7518 §6.2.2, §6.3.2, §6.4.1). */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

/** A public signing key of a client (RFC 7517 §4), as Node.js can import it. */
const publicJwk = z
  .looseObject({
    kty: z.enum(['RSA', 'EC', 'OKP'], 'must be RSA, EC or OKP'),
    kid: z.string().max(200, 'must be at most 200 characters').optional(),
    use: z.literal('sig', 'must be sig').optional(),
  })
  .refine((jwk) => PRIVATE_MEMBERS.every((member) => !(member in jwk)), 'must be a public key')
  .refine((jwk) => {
    try {
      createPublicKey({ key: jwk, format: 'jwk' });
      return true;
    } catch {
      return false;
    }
  }, 'must be a usable public key');

/** The public keys a `private_key_jwt` client signs its assertions with (RFC 7517 §5). */
const jwksInput = z.strictObject({
  keys: z
    .array(publicJwk, { error: 'must be an array' })
    .min(1, 'must hold at least one key')
    .max(10, 'must hold at most 10 keys'),
});

const clientKeysInput = z.strictObject({ jwks: jwksInput });

/** A JWKS {@link jwksInput} accepted: every key checked importable, so jose's type fits. */
function keySet(jwks: z.infer<typeof jwksInput>): JSONWebKeySet {
  return jwks as JSONWebKeySet;
}

const clientInput = z.object({
  name,
  // A client that authenticates with private_key_jwt (RFC 7523) instead of a secret.
  jwks: jwksInput.optional(),
  // RFC 9449 §5.2: a client that gets tokens only with a DPoP proof, bound to its key.
  dpop_bound_access_tokens: z.boolean({ error: 'must be true or false' }).optional(),
  // Optional: a client of the client_credentials grant alone never redirects.
  redirect_uri: z
    .string({ error: 'must be a string' })
    .refine(
      isAcceptableRedirectUri,
      'must be an absolute https URI (http only on localhost) without fragment',
    )
    .nullish(),
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

/** A page of a list: `limit` 1 to 1,000 (default 100), `offset` from 0. */
const PAGE_QUERY = { names: ['limit', 'offset'] } as const;

function pageOf(request: RouteRequest<undefined>): { limit: number; offset: number } {
  const integer = (name: 'limit' | 'offset', fallback: number, min: number, max: number): number => {
    const given = request.query[name];
    if (given === undefined) return fallback;
    const value = /^\d{1,9}$/.test(given) ? Number(given) : NaN;
    if (!(value >= min && value <= max)) {
      throw fieldError('Invalid', name, `must be an integer from ${min} to ${max}`);
    }
    return value;
  };
  return { limit: integer('limit', 100, 1, 1000), offset: integer('offset', 0, 0, 1_000_000_000) };
}

/** The id of the organization the path names; one that does not exist is a 404. */
async function organizationOf(pool: Pool, request: RouteRequest<undefined>): Promise<number> {
  const given = request.params.id ?? '';
  const id = /^[1-9]\d{0,15}$/.test(given) ? Number(given) : undefined;
  if (id === undefined || !(await organizationExists(pool, id)))
    throw baseError('NotFound', `Organization ${given} not found`);
  return id;
}

function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw new DomainError('Unprocessable', columnErrors(parsed.error));
  return parsed.data;
}

/** The administration API of API.md §10 as data, guarded by the deployment's admin token. */
export function adminRouteSpecs(): RouteSpec[] {
  const admin = (spec: Omit<RouteSpec, 'access' | 'tag'>): RouteSpec => ({
    ...spec,
    access: { kind: 'admin' },
    tag: 'Administration',
  });
  return [
    admin({
      method: 'POST',
      path: '/admin/organizations',
      operationId: 'admin.createOrganization',
      summary: 'Create an organization',
      description:
        "Creates an organization: a tenant whose records, clients and webhooks no other organization sees. Its clients are registered next (`POST /admin/organizations/{id}/clients`). Needs the deployment's admin token.",
      body: 'json',
      request: organizationInput,
      responses: { 201: { description: 'The organization', schema: organizationSchema } },
      errors: [415, 422],
    }),
    admin({
      method: 'GET',
      path: '/admin/organizations',
      operationId: 'admin.listOrganizations',
      summary: 'List the organizations, by id',
      description:
        "A page of the deployment's organizations in id order (`limit`, `offset`). Needs the admin token.",
      query: PAGE_QUERY,
      responses: { 200: { description: 'A page of organizations' } },
    }),
    admin({
      method: 'GET',
      path: '/admin/organizations/{id}/clients',
      operationId: 'admin.listClients',
      summary: "List an organization's clients, by creation (never their secrets)",
      description:
        "A page of an organization's OAuth clients in the order they were registered, with their scopes, redirect URI and whether they are disabled; their secrets are never shown again. Needs the admin token.",
      query: PAGE_QUERY,
      responses: { 200: { description: 'A page of clients' } },
      errors: [404],
    }),
    admin({
      method: 'POST',
      path: '/admin/organizations/{id}/clients',
      operationId: 'admin.createClient',
      summary: 'Register a client of an organization (its secret is shown this once)',
      description:
        'Registers an OAuth client of the organization with the scopes it may ask for and, for the authorization-code grant, its `redirect_uri`. The answer holds `client_secret`, shown this once (the platform keeps only its hash). With `jwks`, the public keys it signs client assertions with, the client authenticates with `private_key_jwt` (RFC 7523) instead and has no secret. With `dpop_bound_access_tokens: true` (RFC 9449 §5.2), the client gets tokens only with a DPoP proof, each bound to the proof’s key. Needs the admin token.',
      body: 'json',
      request: clientInput,
      responses: { 201: { description: 'The client with its secret', schema: registeredClientSchema } },
      errors: [404, 415, 422],
    }),
    admin({
      method: 'POST',
      path: '/admin/clients/{client_id}/rotate_secret',
      operationId: 'admin.rotateClientSecret',
      summary: 'Give a client a new secret (shown this once); the old one stops working at once',
      description:
        'Gives the client a new `client_secret`, shown this once; the old one is refused from then on. 409 for a disabled client, or one that authenticates with `private_key_jwt` (it has no secret). Needs the admin token.',
      responses: { 200: { description: 'The client with its new secret' } },
      errors: [404, 409],
    }),
    admin({
      method: 'PUT',
      path: '/admin/clients/{client_id}/jwks',
      operationId: 'admin.replaceClientKeys',
      summary: 'Replace the public keys of a private_key_jwt client',
      description:
        'Replaces the JWKS a `private_key_jwt` client (RFC 7523) signs its client assertions with: assertions signed by a key no longer listed are refused at once, so a client rotates by listing its new key beside the old, switching to it, then listing it alone. 409 for a client with a secret. Needs the admin token.',
      body: 'json',
      request: clientKeysInput,
      responses: { 200: { description: 'The client with its new keys' } },
      errors: [404, 409, 415, 422],
    }),
    admin({
      method: 'POST',
      path: '/admin/clients/{client_id}/disable',
      operationId: 'admin.disableClient',
      summary: 'Disable a client: it authenticates no more, and its grants are revoked (API.md §7)',
      description:
        'Disables the client: it authenticates no more, and every grant it holds is revoked, so its refresh tokens are refused and its access tokens within 5 s. Needs the admin token.',
      responses: { 200: { description: 'The disabled client, and how many grants were revoked' } },
      errors: [404],
    }),
    admin({
      method: 'POST',
      path: '/admin/signing_keys/rotate',
      operationId: 'admin.rotateSigningKey',
      summary: 'Rotate the token signing key (live tokens stay valid)',
      description:
        'Makes a new signing key current: new tokens are signed with it, and the key it replaces stays in the key set until the last token it signed has expired. Needs the admin token.',
      responses: { 201: { description: 'The new key id and the retired one' } },
    }),
    admin({
      method: 'GET',
      path: '/admin/parked_events',
      operationId: 'admin.listParkedEvents',
      summary:
        'List the events a consumer group could not apply and parked, oldest first (API.md §12); `consumer_group` narrows it',
      description:
        "A page of the events a consumer group could not apply, each with its reason and how many of its stream's events wait behind it (`limit`, `offset`, `consumer_group`). Needs the admin token.",
      query: { names: [...PAGE_QUERY.names, 'consumer_group'] },
      responses: {
        200: {
          description: 'A page of parked events, each with the reason and the events waiting behind it',
        },
      },
    }),
    admin({
      method: 'POST',
      path: '/admin/parked_events/{id}/retry',
      operationId: 'admin.retryParkedEvent',
      summary:
        'Apply a parked event again, then the events of its stream waiting behind it, in order; it stays parked, with the new reason, if it fails again',
      description:
        'Asks for a parked event to be applied again, then the events of its stream waiting behind it, in order; if it fails again it stays parked with the new reason. Needs the admin token.',
      responses: { 202: { description: 'The parked event, its retry asked for' } },
      errors: [404],
    }),
  ];
}

/** What serves {@link adminRouteSpecs}, by operationId. */
export function adminOperations(deps: AdminRoutesDeps): Operations {
  const parked = new ParkedEvents(deps.pool);
  const operations: Record<string, Operation<undefined>> = {
    'admin.createOrganization': {
      handle: async (request) => {
        const input = parseBody(organizationInput, request.body);
        const organization = await createOrganization(deps.pool, deps.clock, input.name);
        return jsonReply(201, singleEnvelope(organization));
      },
    },
    'admin.listOrganizations': {
      handle: async (request) => {
        const page = pageOf(request);
        const { organizations, total } = await listOrganizations(deps.pool, page);
        return jsonReply(200, searchEnvelope(organizations, total, page.offset));
      },
    },
    'admin.listClients': {
      handle: async (request) => {
        const id = await organizationOf(deps.pool, request);
        const page = pageOf(request);
        const { clients, total } = await listClients(deps.pool, id, page);
        return jsonReply(200, searchEnvelope(clients, total, page.offset));
      },
    },
    'admin.createClient': {
      handle: async (request) => {
        const id = await organizationOf(deps.pool, request);
        const input = parseBody(clientInput, request.body);
        const client = {
          organizationId: id,
          name: input.name,
          redirectUri: input.redirect_uri ?? null,
          scopes: input.scopes,
          dpopBoundAccessTokens: input.dpop_bound_access_tokens ?? false,
        };
        if (input.jwks !== undefined) {
          const keyed = await createKeyedClient(deps.pool, deps.clock, {
            ...client,
            jwks: keySet(input.jwks),
          });
          return jsonReply(201, singleEnvelope(keyed));
        }
        const registered = await createClient(deps.pool, deps.clock, client);
        // The secret is shown this once; nothing on the way may keep a copy.
        return jsonReply(201, singleEnvelope(registered), { 'Cache-Control': 'no-store' });
      },
    },
    'admin.rotateClientSecret': {
      handle: async (request) => {
        const client = await inTransaction(deps.pool, (tx) =>
          rotateClientSecret(tx, request.params.client_id ?? ''),
        );
        return jsonReply(200, singleEnvelope(client), { 'Cache-Control': 'no-store' });
      },
    },
    'admin.replaceClientKeys': {
      handle: async (request) => {
        const input = parseBody(clientKeysInput, request.body);
        const client = await inTransaction(deps.pool, (tx) =>
          replaceClientKeys(tx, request.params.client_id ?? '', keySet(input.jwks)),
        );
        return jsonReply(200, singleEnvelope(client));
      },
    },
    'admin.disableClient': {
      handle: async (request) => {
        const { client, revokedGrants } = await inTransaction(deps.pool, (tx) =>
          disableClient(tx, deps.clock, deps.grants, request.params.client_id ?? ''),
        );
        return jsonReply(200, singleEnvelope({ ...client, revoked_grants: revokedGrants }));
      },
    },
    'admin.rotateSigningKey': {
      handle: async () => {
        const rotated = await deps.keys.rotate();
        return jsonReply(201, singleEnvelope({ kid: rotated.kid, retired_kid: rotated.retiredKid ?? null }));
      },
    },
    'admin.listParkedEvents': {
      handle: async (request) => {
        const page = pageOf(request);
        const consumerGroup = request.query.consumer_group;
        const { parked: events, total } = await parked.list({
          ...page,
          ...(consumerGroup === undefined ? {} : { consumerGroup }),
        });
        return jsonReply(200, searchEnvelope(events.map(parkedEventBody), total, page.offset));
      },
    },
    'admin.retryParkedEvent': {
      handle: async (request) => {
        const given = request.params.id ?? '';
        const retried = /^[1-9]\d{0,15}$/.test(given) ? await parked.requestRetry(Number(given)) : undefined;
        if (!retried) throw baseError('NotFound', `Parked event ${given} not found`);
        return jsonReply(202, singleEnvelope(parkedEventBody(retried)));
      },
    },
  };
  return operations;
}

/** A parked event as the admin API shows it. */
function parkedEventBody(event: ParkedEvent) {
  return {
    id: event.id,
    consumer_group: event.consumerGroup,
    event_id: event.eventId,
    event_type: event.eventType,
    stream_id: event.streamId,
    stream_type: event.streamType,
    version: event.version,
    organization_id: event.orgId,
    reason: event.reason,
    attempts: event.attempts,
    parked_at: event.parkedAt.toISOString(),
    retry_requested_at: event.retryRequestedAt?.toISOString() ?? null,
    waiting: event.waiting,
  };
}
