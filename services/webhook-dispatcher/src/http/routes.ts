import { z } from 'zod';
import type { AuthContext } from '@ofp/auth-tokens';
import {
  baseError,
  fieldError,
  pageEnvelopeOf,
  searchEnvelope,
  singleEnvelope,
  singleEnvelopeOf,
  type RecordJson,
} from '@ofp/contracts';
import {
  parseQuery,
  searchParameter,
  searchRecords,
  searchEnvelopeSchema,
  singleEnvelopeSchema,
  type ModelDefinition,
} from '@ofp/models';
import { inTransaction, type Pool, type PoolClient } from '@ofp/runtime';
import {
  etagOf,
  jsonReply,
  parseIfMatch,
  recordIdOf,
  type HttpMethod,
  type Operation,
  type Operations,
  type Reply,
  type RouteRequest,
  type RouteSpec,
} from '@ofp/http-api';
import type { CommitWith } from '../delivery/delivery-queue.js';
import { webhookDeliveries, webhooks } from '../models.js';
import { TABLES } from '../schema.js';
import type { Requester, WebhookCommands, WebhookWithSecret } from '../subscriptions/webhook-commands.js';
import { EVENT_TYPES, webhookSchema, webhookWithSecretSchema } from '../subscriptions/event-catalog.js';
import { toApiRecord } from '../subscriptions/webhook-decider.js';
import { PORTAL_CHANGES, PORTAL_SESSION_TTL, type PortalSessions } from '../portal/portal-sessions.js';
import { webhookBody, webhookBodySchema } from './webhook-body.js';

/** The response schemas of the dispatcher's routes (built with its route table). */
function responseSchemas() {
  return {
    webhook: singleEnvelopeOf(webhookSchema(), 'WebhookEnvelope'),
    withSecret: singleEnvelopeOf(webhookWithSecretSchema(), 'WebhookWithSecretEnvelope'),
    webhooks: pageEnvelopeOf(webhookSchema(), 'WebhooksPage'),
    eventTypes: pageEnvelopeOf(
      z
        .strictObject({
          type: z.string().describe('The event type, as `events` of a webhook names it (`order.created`)'),
          model: z.string().describe('The model whose records it is about (`orders`)'),
          description: z.string().describe('When it is sent'),
        })
        .meta({ id: 'WebhookEventType' }),
      'WebhookEventTypes',
    ),
    recovered: singleEnvelopeOf(
      z
        .strictObject({
          webhook_id: z.int().describe('The webhook recovered'),
          since: z.iso.datetime().describe('The moment given (RFC 3339, UTC)'),
          recovered: z.int().min(0).describe('Deliveries queued again'),
        })
        .meta({ examples: [{ webhook_id: 12, since: '2026-11-20T00:00:00.000Z', recovered: 3 }] }),
      'RecoveryEnvelope',
    ),
    portalSession: singleEnvelopeOf(
      z
        .strictObject({
          id: z.int().describe('The session'),
          url: z
            .string()
            .describe(
              "The portal page with the token in its fragment (`#token=`), which browsers never send to a server or put in a Referer: the link to open, or to hand to the endpoint's owner",
            ),
          token: z
            .string()
            .describe(
              "The bearer token the page sends (`ofp_portal_...`), shown this once. It opens the organization's webhooks and deliveries only, and nothing else",
            ),
          created_at: z.iso.datetime().describe('When it was minted (RFC 3339, UTC)'),
          expires_at: z.iso
            .datetime()
            .describe('When it stops working (RFC 3339, UTC): never after the token that minted it'),
        })
        .meta({
          id: 'PortalSession',
          examples: [
            {
              id: 31,
              url: 'https://ofp.example.com/portal#token=ofp_portal_Q2hvb3NlIGEgcmFuZG9tIHRva2VuIG9mIDI1NiBiaXRz',
              token: 'ofp_portal_Q2hvb3NlIGEgcmFuZG9tIHRva2VuIG9mIDI1NiBiaXRz',
              created_at: '2026-11-21T07:30:00.000Z',
              expires_at: '2026-11-21T08:30:00.000Z',
            },
          ],
        }),
      'PortalSessionEnvelope',
    ),
  };
}

export interface WebhookRoutesDependencies {
  readonly pool: Pool;
  readonly commands: WebhookCommands;
  readonly sessions: PortalSessions;
  /** The deployment's public base URL (`PUBLIC_URL`), where the portal page is. */
  readonly publicUrl: string;
}

type Request = RouteRequest<AuthContext>;

const COLLECTION = `/v2/${webhooks.name}`;
const WEBHOOK = `${COLLECTION}/{id}`;
const DELIVERIES = `/v2/${webhookDeliveries.name}`;

/**
 * The dispatcher's part of the route table as data: `/v2/webhooks*` and `/v2/webhook_deliveries*`
 * (API.md §8). Reads need `read`, writes the webhooks' write scope. Every write takes
 * `Idempotency-Key` (which the pipeline keeps), and answers once its change is durably recorded and
 * visible to reads: what `Prefer: respond-async` asks for (API.md §5) is what every write here does.
 */
export function webhookRouteSpecs(): RouteSpec[] {
  /** A route of the table; `response` is its success status and body schema. */
  const route = (
    method: HttpMethod,
    path: string,
    operationId: string,
    [summary, description]: [summary: string, description: string],
    model: ModelDefinition,
    response: [status: number, schema: z.ZodType, creates?: string],
    more: Partial<RouteSpec> = {},
  ): RouteSpec => {
    const writes = method !== 'GET';
    const [status, schema, creates] = response;
    return {
      method,
      path,
      operationId,
      summary,
      description: `${description} ${writes ? writeNotes(webhooks.writeScope) : 'Needs the `read` scope.'}`,
      tag: model.name,
      model: model.name,
      access: { kind: 'bearer', scopes: writes ? [webhooks.writeScope] : ['read'] },
      ...(writes ? { headers: ['Idempotency-Key', 'Prefer'] as const } : {}),
      responses: {
        [status]: {
          description: summary,
          schema,
          headers: [
            ...(path.includes('{') || status === 201 ? ['ETag'] : []),
            ...(status === 201 ? ['Location'] : []),
            ...(writes ? ['Idempotent-Replayed', 'Preference-Applied'] : []),
          ],
          ...(creates === undefined ? {} : { creates }),
        },
      },
      errors: writes ? [404, 409, 412, 415, 422] : [404],
      ...more,
    };
  };
  const searchOf = (model: ModelDefinition) => ({
    query: { names: ['q'], schemas: { q: searchParameter(model) } },
  });
  const delivered = singleEnvelopeSchema(webhookDeliveries);
  const { webhook, withSecret, webhooks: page, eventTypes, recovered, portalSession } = responseSchemas();
  const writeBody = (mode: 'create' | 'update') => ({
    body: 'json' as const,
    request: webhookBodySchema(mode),
  });
  const pinned = { headers: ['Idempotency-Key', 'Prefer', 'If-Match'] as const };
  return [
    route(
      'GET',
      COLLECTION,
      'webhooks.search',
      [
        'Search webhooks',
        "The organization's webhook endpoints: their URL, event types and whether they are enabled, never their secrets. `q` as in every search: filters (all of which must match), order, limit and offset.",
      ],
      webhooks,
      [200, page],
      searchOf(webhooks),
    ),
    route(
      'POST',
      COLLECTION,
      'webhooks.create',
      [
        'Create a webhook (its secret is shown this once)',
        'Subscribes a URL to event types (`*` for all of them; `GET /v2/webhook_event_types` lists them). The answer holds `secret` (`whsec_...`), shown this once: the key that verifies the Standard Webhooks signature of every delivery. The URL must be `https` and reach a public address, unless the deployment allows private targets.',
      ],
      webhooks,
      [201, withSecret],
      writeBody('create'),
    ),
    route(
      'GET',
      WEBHOOK,
      'webhooks.get',
      [
        'Get one webhook',
        'One webhook endpoint by its id: its URL, event types and whether it is enabled, never its secret.',
      ],
      webhooks,
      [200, webhook],
    ),
    route(
      'POST',
      WEBHOOK,
      'webhooks.createAt',
      [
        'Create a webhook at a chosen id',
        'As `POST /v2/webhooks`, at the id in the path; 409 when that id is taken.',
      ],
      webhooks,
      [201, withSecret],
      writeBody('create'),
    ),
    route(
      'PUT',
      WEBHOOK,
      'webhooks.update',
      [
        'Update a webhook',
        'Changes the fields given (`url`, `events`, `description`, `enabled`); those left out keep their value. Enabling a disabled endpoint makes it receive deliveries again. With `If-Match: W/"<version>"` the change applies to that version only, else 412.',
      ],
      webhooks,
      [200, webhook],
      {
        ...writeBody('update'),
        ...pinned,
      },
    ),
    route(
      'PATCH',
      WEBHOOK,
      'webhooks.patch',
      [
        'Update a webhook (same as PUT)',
        'Changes the fields given, as `PUT`; those left out keep their value. With `If-Match: W/"<version>"` the change applies to that version only, else 412.',
      ],
      webhooks,
      [200, webhook],
      {
        ...writeBody('update'),
        ...pinned,
      },
    ),
    route(
      'DELETE',
      WEBHOOK,
      'webhooks.delete',
      [
        'Delete a webhook',
        'Removes the endpoint: nothing more is delivered to it. With `If-Match: W/"<version>"` the delete applies to that version only, else 412.',
      ],
      webhooks,
      [200, webhook],
      pinned,
    ),
    route(
      'POST',
      `${WEBHOOK}/rotate_secret`,
      'webhooks.rotateSecret',
      [
        'Rotate the signing secret (both sign for 24 hours)',
        "Gives the endpoint a new secret, shown this once in the answer. For 24 hours every delivery carries both signatures, the old secret's and the new one's, so that the receiver can switch without refusing any.",
      ],
      webhooks,
      [200, withSecret],
    ),
    route(
      'POST',
      `${WEBHOOK}/test`,
      'webhooks.test',
      [
        'Send a webhook.test event to this endpoint alone',
        'Queues one `webhook.test` event for this endpoint, signed and retried as any other: a way to check a receiver. The answer is the new delivery (`Location` names it), whose attempts show what the receiver answered.',
      ],
      webhooks,
      [201, delivered, DELIVERIES],
    ),
    route(
      'POST',
      `${WEBHOOK}/recover`,
      'webhooks.recover',
      [
        'Send every given-up delivery since a moment again (at most 14 days back)',
        'After an outage of the receiver: every delivery to this endpoint that failed for good since `since` (at most 14 days ago) is queued again, in its order. The answer says how many.',
      ],
      webhooks,
      [200, recovered],
      { body: 'json', request: RECOVER_BODY },
    ),
    {
      method: 'POST',
      path: `${COLLECTION}/portal_sessions`,
      operationId: 'webhooks.portalSession',
      summary: 'Open the subscriber portal: a short-lived link',
      description: `Mints a portal session: a link to the page \`GET /portal\` and the bearer token in it, which show the organization's endpoints, event types and deliveries (attempts, the receiver's answers, payloads) and let whoever holds it retry, recover, send a test event, rotate a secret and enable or disable an endpoint, through the operations of this API, and nothing more: creating, deleting or repointing an endpoint with it is a 403. The token works on \`/v2/webhooks*\` and \`/v2/webhook_deliveries*\` of this organization only, for \`expires_in\` seconds (${PORTAL_SESSION_TTL.default} unless asked, at most ${PORTAL_SESSION_TTL.max}) and never longer than the token that minted it; it cannot mint another. ${writeNotes('operations')}`,
      tag: webhooks.name,
      model: webhooks.name,
      access: { kind: 'bearer', scopes: ['operations'] },
      headers: ['Idempotency-Key'],
      body: 'json',
      request: PORTAL_SESSION_BODY,
      responses: {
        201: {
          description: 'The session: its link and token',
          schema: portalSession,
          headers: ['Idempotent-Replayed'],
        },
      },
      errors: [409, 415, 422],
    },
    route(
      'GET',
      `/v2/webhook_event_types`,
      'webhooks.eventTypes',
      [
        'The event types a webhook may subscribe to, with what each means',
        "Every event type, its model and what it means. Each type's body is in this document's `webhooks` section, with its schema.",
      ],
      webhooks,
      [200, eventTypes],
      { errors: [] },
    ),
    route(
      'GET',
      DELIVERIES,
      'webhook_deliveries.search',
      [
        'Search webhook deliveries',
        "Each delivery of an event to an endpoint: its status (`pending`, `succeeded`, `failed`), attempts, the next attempt's time and the attempt log (each attempt's time, duration, status code, error and the start of the response). `q` as in every search: filters (all of which must match), order, limit and offset.",
      ],
      webhookDeliveries,
      [200, searchEnvelopeSchema(webhookDeliveries)],
      searchOf(webhookDeliveries),
    ),
    route(
      'GET',
      `${DELIVERIES}/{id}`,
      'webhook_deliveries.get',
      [
        'Get one webhook delivery',
        'One delivery with its attempt log: when each attempt was made, how long it took, what the receiver answered (status code and the start of the body) or the network error.',
      ],
      webhookDeliveries,
      [200, delivered],
    ),
    route(
      'POST',
      `${DELIVERIES}/{id}/retry`,
      'webhook_deliveries.retry',
      [
        'Send a finished delivery again',
        'Queues a delivery that succeeded or failed for good once more, with the same `webhook-id`, ahead of later deliveries of the same record not yet sent, so that their order holds.',
      ],
      webhookDeliveries,
      [200, delivered],
    ),
  ];
}

/**
 * What serves {@link webhookRouteSpecs}, by operationId. Each write makes its answer in its change's
 * transaction and records it there for the request's Idempotency-Key ({@link answer}).
 */
export function webhookOperations(deps: WebhookRoutesDependencies): Operations {
  const serve = (handle: (request: Request) => Promise<Reply>): Operation<AuthContext> => ({ handle });
  const update = (request: Request): Promise<Reply> => {
    const ifMatch = parseIfMatch(request.header('if-match'));
    const body = webhookBody(request.body, 'update');
    refuseBeyondPortal(deps.sessions, request, Object.keys(body));
    return answer(
      request,
      (commitWith) => deps.commands.update(requesterOf(request), idOf(request), body, ifMatch, commitWith),
      (record: RecordJson) => recordReply(record),
    );
  };
  const delivery = async (orgId: number, id: number, db?: PoolClient): Promise<RecordJson> => {
    const found = await deps.commands.delivery(orgId, id, db);
    if (!found) throw baseError('NotFound', `${webhookDeliveries.singular} ${id} not found`);
    return found;
  };
  const search =
    (model: ModelDefinition, toApi: (stored: Record<string, unknown>) => RecordJson) =>
    async (request: Request): Promise<Reply> => {
      const query = parseQuery(model, request.query.q);
      const page = await searchRecords(deps.pool, model, request.principal.orgId, query, TABLES);
      return jsonReply(200, searchEnvelope(page.results.map(toApi), page.total_results, query.offset));
    };
  const withSecret = (request: Request, created: WebhookWithSecret, status: 200 | 201): Reply => {
    const reply = recordReply({ ...created.record, secret: created.secret }, status);
    if (status !== 201) return reply;
    return {
      ...reply,
      headers: { ...reply.headers, Location: `${request.prefix}${COLLECTION}/${created.record.id}` },
    };
  };
  const create = (request: Request, id?: number): Promise<Reply> => {
    const body = webhookBody(request.body, 'create');
    return answer(
      request,
      (commitWith) => deps.commands.create(requesterOf(request), body, id, commitWith),
      (created: WebhookWithSecret) => withSecret(request, created, 201),
    );
  };
  return {
    'webhooks.search': serve(search(webhooks, toApiRecord)),
    'webhooks.create': serve((request) => create(request)),
    'webhooks.get': serve(async (request) => {
      const found = await deps.commands.get(request.principal.orgId, idOf(request));
      if (!found) throw baseError('NotFound', `${webhooks.singular} ${request.params.id} not found`);
      return recordReply(found);
    }),
    'webhooks.createAt': serve((request) => create(request, idOf(request))),
    'webhooks.update': serve(update),
    'webhooks.patch': serve(update),
    'webhooks.delete': serve((request) => {
      const ifMatch = parseIfMatch(request.header('if-match'));
      return answer(
        request,
        (commitWith) => deps.commands.delete(requesterOf(request), idOf(request), ifMatch, commitWith),
        (record: RecordJson) => recordReply(record),
      );
    }),
    'webhooks.rotateSecret': serve((request) =>
      answer(
        request,
        (commitWith) => deps.commands.rotateSecret(request.principal.orgId, idOf(request), commitWith),
        (rotated: WebhookWithSecret) => withSecret(request, rotated, 200),
      ),
    ),
    'webhooks.test': serve((request) => {
      const { orgId } = request.principal;
      return answer(
        request,
        (commitWith) => deps.commands.sendTest(orgId, idOf(request), commitWith),
        async (id: number, db: PoolClient) => {
          const reply = recordReply(await delivery(orgId, id, db), 201);
          return {
            ...reply,
            headers: { ...reply.headers, Location: `${request.prefix}${DELIVERIES}/${id}` },
          };
        },
      );
    }),
    'webhooks.recover': serve((request) => {
      const id = idOf(request);
      const since = sinceOf(request.body);
      return answer(
        request,
        (commitWith) => deps.commands.recover(request.principal.orgId, id, since, commitWith),
        (recovered: number) =>
          jsonReply(200, singleEnvelope({ webhook_id: id, since: since.toISOString(), recovered })),
      );
    }),
    // The session and its answer for the Idempotency-Key commit together.
    'webhooks.portalSession': serve(async (request) => {
      const { expires_in } = parsed(PORTAL_SESSION_BODY, request.body);
      return inTransaction(deps.pool, async (client) => {
        const session = await deps.sessions.mint(request.principal, expires_in, client);
        const reply = jsonReply(
          201,
          singleEnvelope({
            id: session.id,
            url: `${deps.publicUrl.replace(/\/$/, '')}/portal#token=${session.token}`,
            token: session.token,
            created_at: session.createdAt.toISOString(),
            expires_at: session.expiresAt.toISOString(),
          }),
        );
        await request.idempotency?.record(client, reply);
        return reply;
      });
    }),
    'webhooks.eventTypes': serve(() =>
      Promise.resolve(jsonReply(200, searchEnvelope([...EVENT_TYPES], EVENT_TYPES.length, 0))),
    ),
    'webhook_deliveries.search': serve(search(webhookDeliveries, (stored) => stored as RecordJson)),
    'webhook_deliveries.get': serve(async (request) =>
      recordReply(await delivery(request.principal.orgId, idOf(request))),
    ),
    'webhook_deliveries.retry': serve((request) => {
      const { orgId } = request.principal;
      const id = idOf(request);
      return answer(
        request,
        (commitWith) => deps.commands.retryDelivery(orgId, id, commitWith),
        async (_: void, db: PoolClient) => recordReply(await delivery(orgId, id, db)),
      );
    }),
  };
}

/** How every write here behaves, in the reference. */
function writeNotes(scope: string): string {
  return `An \`Idempotency-Key\` makes a retry safe: the same key and body within 24 h answer the first response again (\`Idempotent-Replayed: true\`). The answer comes once reads show the change. Needs the \`${scope}\` scope.`;
}

/**
 * A write's answer, made from the change's result in the change's transaction, and recorded there
 * for the request's Idempotency-Key (API.md §5): the change and its answer commit together, or
 * neither does.
 */
async function answer<T>(
  request: Request,
  write: (commitWith: CommitWith<T>) => Promise<T>,
  reply: (result: T, db: PoolClient) => Reply | Promise<Reply>,
): Promise<Reply> {
  let answered: Reply | undefined;
  await write(async (client, result) => {
    answered = await reply(result, client);
    await request.idempotency?.record(client, answered);
  });
  if (!answered) throw new Error(`${request.method} ${request.url}: the write committed without its answer`);
  return answered;
}

function requesterOf(request: Request): Requester {
  const { orgId, clientId } = request.principal;
  return { orgId, clientId, requestId: request.id };
}

/** `ETag: W/"<version>"` (API.md §4) and the single-record envelope. */
function recordReply(record: RecordJson, status = 200): Reply {
  return jsonReply(status, singleEnvelope(record), { ETag: etagOf(record.version) });
}

function idOf(request: Request): number {
  return recordIdOf(request.params.id, 'record');
}

const RECOVER_BODY = z.object({
  since: z.iso
    .datetime({
      offset: true,
      error: 'must be an RFC 3339 timestamp such as 2026-11-21T07:30:00Z',
    })
    .describe(
      'Re-send what failed for good since this moment (RFC 3339), at most 14 days ago and not in the future (else a 422 on `since`: a rule of the clock, which JSON Schema cannot state)',
    ),
});

const PORTAL_SESSION_BODY = z.strictObject({
  expires_in: z
    .int()
    .min(PORTAL_SESSION_TTL.min)
    .max(PORTAL_SESSION_TTL.max)
    .default(PORTAL_SESSION_TTL.default)
    .describe(
      `How long the session lasts, in seconds (${PORTAL_SESSION_TTL.default} when left out): the page asks for a new link after it`,
    )
    .meta({ examples: [900] }),
});

/** `recover`'s `{since}`. */
function sinceOf(body: unknown): Date {
  return new Date(parsed(RECOVER_BODY, body).since);
}

/** A body `schema` takes, else a 422 on the field it refused (`base` for the body itself or an unknown key). */
function parsed<T extends z.ZodType>(schema: T, body: unknown): z.output<T> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  const field = issue?.code === 'unrecognized_keys' ? undefined : issue?.path[0];
  throw fieldError(
    'Unprocessable',
    typeof field === 'string' ? field : 'base',
    issue?.code === 'unrecognized_keys'
      ? `unknown field ${issue.keys.join(', ')}`
      : (issue?.message ?? 'invalid'),
  );
}

/** A portal session's change of a webhook sets no field but those the portal may change (403). */
function refuseBeyondPortal(sessions: PortalSessions, request: Request, fields: readonly string[]): void {
  const token = /^bearer\s+(\S+)$/i.exec(request.header('authorization') ?? '')?.[1];
  if (token === undefined || !sessions.owns(token)) return;
  const beyond = fields.filter((field) => !PORTAL_CHANGES.has(field));
  if (beyond.length > 0)
    throw baseError(
      'Forbidden',
      `A portal session enables and disables an endpoint, and changes nothing else of it (${beyond.join(', ')})`,
    );
}
