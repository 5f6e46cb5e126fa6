import { z } from 'zod';
import type { AuthContext, BearerGate } from '@ofp/auth-tokens';
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
import {
  etagOf,
  jsonReply,
  parseIdempotencyKey,
  parseIfMatch,
  prefersAsync,
  recordIdOf,
  requestHash,
  type HttpMethod,
  type IdempotencyStore,
  type Pool,
  type Reply,
  type Route,
  type RouteRequest,
} from '@ofp/runtime';
import { webhookDeliveries, webhooks } from '../models.js';
import { TABLES } from '../schema.js';
import type { Requester, WebhookCommands, WebhookWithSecret } from '../subscriptions/webhook-commands.js';
import { EVENT_TYPES, webhookSchema, webhookWithSecretSchema } from '../subscriptions/event-catalog.js';
import { toApiRecord } from '../subscriptions/webhook-decider.js';
import { webhookBody, webhookBodySchema } from './webhook-body.js';

/** The response schemas of the dispatcher's routes (built with its route table). */
function responseSchemas() {
  return {
    webhook: singleEnvelopeOf(webhookSchema(), 'WebhookEnvelope'),
    withSecret: singleEnvelopeOf(webhookWithSecretSchema(), 'WebhookWithSecretEnvelope'),
    webhooks: pageEnvelopeOf(webhookSchema(), 'WebhooksPage'),
    eventTypes: pageEnvelopeOf(
      z
        .strictObject({ type: z.string(), model: z.string(), description: z.string() })
        .meta({ id: 'WebhookEventType' }),
      'WebhookEventTypes',
    ),
    recovered: singleEnvelopeOf(
      z.strictObject({ webhook_id: z.int(), since: z.iso.datetime(), recovered: z.int().min(0) }),
      'RecoveryEnvelope',
    ),
  };
}

export interface WebhookRoutesDependencies {
  readonly pool: Pool;
  readonly commands: WebhookCommands;
  readonly idempotency: IdempotencyStore;
  /** Bearer verification and the client's rate limit. */
  readonly gate: BearerGate;
}

type WebhookRoute = Route<AuthContext>;
type Request = RouteRequest<AuthContext>;

/**
 * The dispatcher's part of the route table: `/v2/webhooks*` and `/v2/webhook_deliveries*` (API.md
 * §8). Reads need `read`, writes the webhooks' write scope. Every write takes `Idempotency-Key`, and
 * answers once its change is durably recorded and visible to reads: what `Prefer: respond-async` asks
 * for (API.md §5) is what every write here does.
 */
export function webhookRoutes(deps: WebhookRoutesDependencies): WebhookRoute[] {
  const read = deps.gate.access(['read']);
  const write = deps.gate.access([webhooks.writeScope]);
  const collection = `/v2/${webhooks.name}`;
  const webhook = `${collection}/{id}`;
  const deliveries = `/v2/${webhookDeliveries.name}`;
  /** A route of the table; `response` is its success status and body schema. */
  const route = (
    method: HttpMethod,
    path: string,
    operationId: string,
    summary: string,
    model: ModelDefinition,
    response: [status: number, schema: z.ZodType],
    handle: (request: Request) => Promise<Reply>,
    more: Partial<WebhookRoute> = {},
  ): WebhookRoute => {
    const writes = method !== 'GET';
    const [status, schema] = response;
    return {
      method,
      path,
      operationId,
      summary,
      tag: model.name,
      model: model.name,
      access: writes ? write : read,
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
        },
      },
      errors: writes ? [404, 409, 412, 415, 422] : [404],
      handle: writes ? (request) => idempotent(deps.idempotency, request, () => handle(request)) : handle,
      ...more,
    };
  };
  const update = async (request: Request): Promise<Reply> => {
    const ifMatch = parseIfMatch(request.header('if-match'));
    const body = webhookBody(request.body, 'update');
    return recordReply(await deps.commands.update(requesterOf(request), idOf(request), body, ifMatch));
  };
  const delivery = async (orgId: number, id: number): Promise<RecordJson> => {
    const found = await deps.commands.delivery(orgId, id);
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
      headers: { ...reply.headers, Location: `${request.prefix}${collection}/${created.record.id}` },
    };
  };
  const create = (request: Request, id?: number) =>
    deps.commands.create(requesterOf(request), webhookBody(request.body, 'create'), id);
  const searchOf = (model: ModelDefinition) => ({
    query: { names: ['q'], schemas: { q: searchParameter(model) } },
  });
  const delivered = singleEnvelopeSchema(webhookDeliveries);
  const {
    webhook: WEBHOOK,
    withSecret: WEBHOOK_WITH_SECRET,
    webhooks: WEBHOOKS,
    eventTypes,
    recovered,
  } = responseSchemas();
  const writeBody = (mode: 'create' | 'update') => ({
    body: 'json' as const,
    request: webhookBodySchema(mode),
  });

  return [
    route(
      'GET',
      collection,
      'webhooks.search',
      'Search webhooks',
      webhooks,
      [200, WEBHOOKS],
      search(webhooks, toApiRecord),
      searchOf(webhooks),
    ),
    route(
      'POST',
      collection,
      'webhooks.create',
      'Create a webhook (its secret is shown this once)',
      webhooks,
      [201, WEBHOOK_WITH_SECRET],
      async (request) => withSecret(request, await create(request), 201),
      writeBody('create'),
    ),
    route('GET', webhook, 'webhooks.get', 'Get one webhook', webhooks, [200, WEBHOOK], async (request) => {
      const found = await deps.commands.get(request.principal.orgId, idOf(request));
      if (!found) throw baseError('NotFound', `${webhooks.singular} ${request.params.id} not found`);
      return recordReply(found);
    }),
    route(
      'POST',
      webhook,
      'webhooks.createAt',
      'Create a webhook at a chosen id',
      webhooks,
      [201, WEBHOOK_WITH_SECRET],
      async (request) => withSecret(request, await create(request, idOf(request)), 201),
      writeBody('create'),
    ),
    route('PUT', webhook, 'webhooks.update', 'Update a webhook', webhooks, [200, WEBHOOK], update, {
      ...writeBody('update'),
      headers: ['Idempotency-Key', 'Prefer', 'If-Match'],
    }),
    route(
      'PATCH',
      webhook,
      'webhooks.patch',
      'Update a webhook (same as PUT)',
      webhooks,
      [200, WEBHOOK],
      update,
      {
        ...writeBody('update'),
        headers: ['Idempotency-Key', 'Prefer', 'If-Match'],
      },
    ),
    route(
      'DELETE',
      webhook,
      'webhooks.delete',
      'Delete a webhook',
      webhooks,
      [200, WEBHOOK],
      async (request) =>
        recordReply(
          await deps.commands.delete(
            requesterOf(request),
            idOf(request),
            parseIfMatch(request.header('if-match')),
          ),
        ),
      { headers: ['Idempotency-Key', 'Prefer', 'If-Match'] },
    ),
    route(
      'POST',
      `${webhook}/rotate_secret`,
      'webhooks.rotateSecret',
      'Rotate the signing secret (both sign for 24 hours)',
      webhooks,
      [200, WEBHOOK_WITH_SECRET],
      async (request) =>
        withSecret(request, await deps.commands.rotateSecret(request.principal.orgId, idOf(request)), 200),
    ),
    route(
      'POST',
      `${webhook}/test`,
      'webhooks.test',
      'Send a webhook.test event to this endpoint alone',
      webhooks,
      [201, delivered],
      async (request) => {
        const { orgId } = request.principal;
        const id = await deps.commands.sendTest(orgId, idOf(request));
        const reply = recordReply(await delivery(orgId, id), 201);
        return { ...reply, headers: { ...reply.headers, Location: `${request.prefix}${deliveries}/${id}` } };
      },
    ),
    route(
      'POST',
      `${webhook}/recover`,
      'webhooks.recover',
      'Send every given-up delivery since a moment again (at most 14 days back)',
      webhooks,
      [200, recovered],
      async (request) => {
        const id = idOf(request);
        const since = sinceOf(request.body);
        const recovered = await deps.commands.recover(request.principal.orgId, id, since);
        return jsonReply(200, singleEnvelope({ webhook_id: id, since: since.toISOString(), recovered }));
      },
      { body: 'json', request: RECOVER_BODY },
    ),
    route(
      'GET',
      `/v2/webhook_event_types`,
      'webhooks.eventTypes',
      'The event types a webhook may subscribe to, with what each means',
      webhooks,
      [200, eventTypes],
      () => Promise.resolve(jsonReply(200, searchEnvelope([...EVENT_TYPES], EVENT_TYPES.length, 0))),
      { errors: [] },
    ),
    route(
      'GET',
      deliveries,
      'webhook_deliveries.search',
      'Search webhook deliveries',
      webhookDeliveries,
      [200, searchEnvelopeSchema(webhookDeliveries)],
      search(webhookDeliveries, (stored) => stored as RecordJson),
      searchOf(webhookDeliveries),
    ),
    route(
      'GET',
      `${deliveries}/{id}`,
      'webhook_deliveries.get',
      'Get one webhook delivery',
      webhookDeliveries,
      [200, delivered],
      async (request) => recordReply(await delivery(request.principal.orgId, idOf(request))),
    ),
    route(
      'POST',
      `${deliveries}/{id}/retry`,
      'webhook_deliveries.retry',
      'Send a finished delivery again',
      webhookDeliveries,
      [200, delivered],
      async (request) => {
        const { orgId } = request.principal;
        const id = idOf(request);
        await deps.commands.retryDelivery(orgId, id);
        return recordReply(await delivery(orgId, id));
      },
    ),
  ];
}

/** The headers of a write's response that its replays carry too. */
const REPLAYED_HEADERS = ['ETag', 'Location', 'Preference-Applied'];

/**
 * `Idempotency-Key` on a write (API.md §5): the key is held while the request runs (a second request
 * with it meanwhile is a 409), and a successful response is stored and replayed for 24 h, byte for
 * byte, with `Idempotent-Replayed: true`; a failed request frees the key. The same key with another
 * method, path or body is a 422.
 */
async function idempotent(
  store: IdempotencyStore,
  request: Request,
  run: () => Promise<Reply>,
): Promise<Reply> {
  const key = parseIdempotencyKey(request.header('idempotency-key'));
  const preference: Record<string, string> = prefersAsync(request.header('prefer'))
    ? { 'Preference-Applied': 'respond-async' }
    : {};
  if (key === undefined) {
    const reply = await run();
    return { ...reply, headers: { ...reply.headers, ...preference } };
  }
  const { orgId } = request.principal;
  const path = request.url.split('?')[0] ?? request.url;
  const stored = await store.begin(
    orgId,
    key,
    requestHash(request.method, path.replace(/^\/api/, ''), request.body),
  );
  if (stored) return { ...stored, headers: { ...stored.headers, 'Idempotent-Replayed': 'true' } };
  let reply: Reply;
  try {
    reply = await run();
  } catch (error) {
    await store.abandon(orgId, key).catch((freeing: unknown) => {
      request.log.warn({ err: freeing }, 'freeing an idempotency key failed');
    });
    throw error;
  }
  const headers = { ...reply.headers, ...preference };
  const kept = Object.fromEntries(
    REPLAYED_HEADERS.flatMap((name) => (headers[name] === undefined ? [] : [[name, headers[name]]])),
  );
  await store.finish(orgId, key, { status: reply.status, headers: kept, body: reply.body ?? '' });
  return { ...reply, headers };
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
  since: z.iso.datetime({
    offset: true,
    error: 'must be an RFC 3339 timestamp such as 2026-11-21T07:30:00Z',
  }),
});

/** `recover`'s `{since}`. */
function sinceOf(body: unknown): Date {
  const parsed = RECOVER_BODY.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw fieldError(
      'Unprocessable',
      issue?.path[0] === 'since' ? 'since' : 'base',
      issue?.message ?? 'invalid',
    );
  }
  return new Date(parsed.data.since);
}
