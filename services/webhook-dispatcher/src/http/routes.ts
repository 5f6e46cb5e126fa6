import { Router, type Request, type RequestHandler, type Response } from 'express';
import { z } from 'zod';
import { authOf, requireScope } from '@ofp/auth-tokens';
import { baseError, fieldError, searchEnvelope, singleEnvelope, type RecordJson } from '@ofp/contracts';
import { parseQuery, searchRecords, webhookDeliveries, webhooks, type ModelDefinition } from '@ofp/models';
import {
  jsonBodyOf,
  parseIdempotencyKey,
  parseIfMatch,
  prefersAsync,
  recordIdOf,
  requestHash,
  type IdempotencyStore,
  type Pool,
} from '@ofp/runtime';
import { TABLES } from '../schema.js';
import type { Actor, WebhookCommands, WebhookWithSecret } from '../subscriptions/webhook-commands.js';
import { toApiRecord } from '../subscriptions/webhook-decider.js';
import { webhookBody } from './webhook-body.js';

export interface WebhookRoutesDependencies {
  readonly pool: Pool;
  readonly commands: WebhookCommands;
  readonly idempotency: IdempotencyStore;
  /** Verifies the bearer token (and applies the client's rate limit). */
  readonly authenticate: readonly RequestHandler[];
}

/**
 * `/webhooks*` and `/webhook_deliveries*` (API.md §8), for mounting under `/v2` and `/api/v2` ahead of
 * the api's routes. Only these paths authenticate here; every other path falls through untouched.
 */
export function webhookRoutes(deps: WebhookRoutesDependencies): Router {
  const router = Router();
  router.use(['/webhooks', '/webhook_deliveries'], ...deps.authenticate);
  // A webhook write answers once it is durably recorded, and is visible to reads at once: what
  // `Prefer: respond-async` asks for (API.md §5) is what every write here does.
  router.use(['/webhooks', '/webhook_deliveries'], (req, res, next) => {
    if (req.method !== 'GET' && prefersAsync(req.get('prefer')))
      res.setHeader('Preference-Applied', 'respond-async');
    next();
  });
  router.use(['/webhooks', '/webhook_deliveries'], idempotent(deps.idempotency));
  const read = requireScope('read');
  const write = requireScope(webhooks.writeScope);

  router
    .route('/webhooks')
    .get(read, search(webhooks, toApiRecord))
    .post(write, async (req, res) => {
      const created = await deps.commands.create(actorOf(req), webhookBody(jsonBodyOf(req), 'create'));
      sendWithSecret(req, res, created, 201);
    })
    .all(methodNotAllowed('GET, POST'));

  router
    .route('/webhooks/:id')
    .get(read, async (req, res) => {
      const record = await deps.commands.get(authOf(req).orgId, idOf(req));
      if (!record) throw baseError('NotFound', `${webhooks.singular} ${String(req.params.id)} not found`);
      sendRecord(res, record);
    })
    .post(write, async (req, res) => {
      const body = webhookBody(jsonBodyOf(req), 'create');
      sendWithSecret(req, res, await deps.commands.create(actorOf(req), body, idOf(req)), 201);
    })
    .put(write, update)
    .patch(write, update)
    .delete(write, async (req, res) => {
      sendRecord(res, await deps.commands.delete(actorOf(req), idOf(req), ifMatchOf(req)));
    })
    .all(methodNotAllowed('GET, POST, PUT, PATCH, DELETE'));

  router
    .route('/webhooks/:id/rotate_secret')
    .post(write, async (req, res) => {
      sendWithSecret(req, res, await deps.commands.rotateSecret(authOf(req).orgId, idOf(req)), 200);
    })
    .all(methodNotAllowed('POST'));

  router
    .route('/webhooks/:id/test')
    .post(write, async (req, res) => {
      const { orgId } = authOf(req);
      const deliveryId = await deps.commands.sendTest(orgId, idOf(req));
      res.setHeader('Location', `${req.baseUrl}/${webhookDeliveries.name}/${deliveryId}`);
      sendRecord(res, await delivery(orgId, deliveryId), 201);
    })
    .all(methodNotAllowed('POST'));

  router
    .route('/webhooks/:id/recover')
    .post(write, async (req, res) => {
      const id = idOf(req);
      const since = sinceOf(jsonBodyOf(req));
      const recovered = await deps.commands.recover(authOf(req).orgId, id, since);
      res.json(singleEnvelope({ webhook_id: id, since: since.toISOString(), recovered }));
    })
    .all(methodNotAllowed('POST'));

  router
    .route('/webhook_deliveries')
    .get(
      read,
      search(webhookDeliveries, (record) => record as RecordJson),
    )
    .all(methodNotAllowed('GET'));

  router
    .route('/webhook_deliveries/:id')
    .get(read, async (req, res) => {
      sendRecord(res, await delivery(authOf(req).orgId, idOf(req)));
    })
    .all(methodNotAllowed('GET'));

  router
    .route('/webhook_deliveries/:id/retry')
    .post(write, async (req, res) => {
      const { orgId } = authOf(req);
      const id = idOf(req);
      await deps.commands.retryDelivery(orgId, id);
      sendRecord(res, await delivery(orgId, id));
    })
    .all(methodNotAllowed('POST'));

  async function update(req: Request, res: Response): Promise<void> {
    const body = webhookBody(jsonBodyOf(req), 'update');
    sendRecord(res, await deps.commands.update(actorOf(req), idOf(req), body, ifMatchOf(req)));
  }

  async function delivery(orgId: number, id: number): Promise<RecordJson> {
    const record = await deps.commands.delivery(orgId, id);
    if (!record) throw baseError('NotFound', `${webhookDeliveries.singular} ${id} not found`);
    return record;
  }

  function search(
    model: ModelDefinition,
    toApi: (stored: Record<string, unknown>) => RecordJson,
  ): RequestHandler {
    return async (req, res) => {
      const q = req.query.q;
      if (q !== undefined && typeof q !== 'string') throw baseError('Invalid', 'q must be given once');
      const query = parseQuery(model, q);
      const page = await searchRecords(deps.pool, model, authOf(req).orgId, query, TABLES);
      res.json(searchEnvelope(page.results.map(toApi), page.total_results, query.offset));
    };
  }

  return router;
}

/** The headers of a write's response that its replays carry too. */
const REPLAYED_HEADERS = ['etag', 'location', 'preference-applied'];

/**
 * `Idempotency-Key` on every write (API.md §5): the key is held while the request runs (a second
 * request with it meanwhile is a 409), and a successful response is stored and replayed for 24 h with
 * `Idempotent-Replayed: true`; a failed request frees the key. The same key with another method, path
 * or body is a 422.
 */
function idempotent(store: IdempotencyStore): RequestHandler {
  return async (req, res, next) => {
    const key =
      req.method === 'GET' || req.method === 'HEAD'
        ? undefined
        : parseIdempotencyKey(req.get('idempotency-key'));
    if (key === undefined) {
      next();
      return;
    }
    const { orgId } = authOf(req);
    const stored = await store.begin(orgId, key, requestHash(req.method, req.path, req.body));
    if (stored) {
      for (const [name, value] of Object.entries(stored.headers)) res.setHeader(name, value);
      res.setHeader('Idempotent-Replayed', 'true');
      res.status(stored.status).json(stored.body);
      return;
    }
    const json = res.json.bind(res);
    res.json = ((body: unknown) => {
      if (res.statusCode >= 400) return json(body);
      const headers = Object.fromEntries(
        REPLAYED_HEADERS.flatMap((name) => {
          const value = res.getHeader(name);
          return typeof value === 'string' ? [[name, value]] : [];
        }),
      );
      store.finish(orgId, key, { status: res.statusCode, headers, body }).then(() => json(body), next);
      return res;
    }) as typeof res.json;
    res.on('finish', () => {
      if (res.statusCode >= 400)
        store.abandon(orgId, key).catch((error: unknown) => {
          req.log.warn({ err: error }, 'freeing an idempotency key failed');
        });
    });
    next();
  };
}

function actorOf(req: Request): Actor {
  const { orgId, clientId } = authOf(req);
  return { orgId, clientId, requestId: req.id };
}

/** `ETag: W/"<version>"` (API.md §4) and the single-record envelope. */
function sendRecord(res: Response, record: RecordJson, status = 200): void {
  res.setHeader('ETag', `W/"${record.version}"`);
  res.status(status).json(singleEnvelope(record));
}

/** Create and rotate_secret are the only answers that show the secret (API.md §8). */
function sendWithSecret(
  req: Request,
  res: Response,
  { record, secret }: WebhookWithSecret,
  status: 200 | 201,
): void {
  if (status === 201) res.setHeader('Location', `${req.baseUrl}/${webhooks.name}/${record.id}`);
  sendRecord(res, { ...record, secret }, status);
}

function idOf(req: Request): number {
  return recordIdOf(req.params.id, 'record');
}

/** The version an `If-Match` header pins (API.md §5); `*` and no header pin none. */
function ifMatchOf(req: Request): number | undefined {
  return parseIfMatch(req.get('if-match'));
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

function methodNotAllowed(allow: string): RequestHandler {
  return (req) => {
    throw baseError('MethodNotAllowed', `${req.method} is not allowed here`, { Allow: allow });
  };
}
