import { Router, type Request, type RequestHandler, type Response } from 'express';
import { baseError, singleEnvelope } from '@ofp/contracts';
import { authOf, requireScope } from '@ofp/auth-tokens';
import {
  etagOf,
  jsonBodyOf,
  parseIdempotencyKey,
  parseIfMatch,
  prefersAsync,
  recordIdOf,
  requestHash,
  type IdempotencyStore,
  type StoredResponse,
} from '@ofp/runtime';
import { allowedMethods, findModel, validateCreate, validateUpdate, type ModelDefinition } from '@ofp/models';
import type { RecordCommands, WriteOutcome, WriteRequest } from '../commands/record-commands.js';
import type { ProjectionWaiter } from '../queries/projection-waiter.js';
import type { TenantSeeder } from '../commands/tenant-seeder.js';

export interface ApiRoutesDependencies {
  readonly commands: RecordCommands;
  readonly waiter: ProjectionWaiter;
  readonly idempotency: IdempotencyStore;
  readonly tenants: TenantSeeder;
  /** Verifies the bearer token (and applies the client's rate limit). */
  readonly authenticate: readonly RequestHandler[];
}

/**
 * The public `/v2` model endpoints (API.md §5-§6) but their reads (`readRoutes`, served ahead of
 * express), mounted under `/v2` and `/api/v2`.
 */
export function apiRoutes(deps: ApiRoutesDependencies): Router {
  const router = Router();
  router.use(...deps.authenticate);
  // Every organization has its seed records (phone number types) before its first request is served.
  router.use(async (req, _res, next) => {
    await deps.tenants.ensureSeeded(authOf(req).orgId);
    next();
  });

  // The scope every write of the model needs; models with operator changes also let an `operations`
  // token through, and the decided change then names the exact scopes it needs (API.md §7).
  const writeScope: RequestHandler = (req, res, next) => {
    const model = modelOf(req);
    const scope =
      model.operatorChanges && authOf(req).scopes.includes('operations') ? 'operations' : model.writeScope;
    requireScope(scope)(req, res, next);
  };

  router
    .route('/:model')
    .all(allowed('collection'))
    .post(writeScope, async (req, res) => {
      await write(req, res, { kind: 'create', body: validateCreate(modelOf(req), jsonBodyOf(req)) });
    });

  router
    .route('/:model/:id')
    .all(allowed('record'))
    .post(writeScope, async (req, res) => {
      await write(req, res, {
        kind: 'create',
        id: idOf(req),
        body: validateCreate(modelOf(req), jsonBodyOf(req)),
      });
    })
    .put(writeScope, update)
    .patch(writeScope, update)
    .delete(writeScope, async (req, res) => {
      const ifMatch = parseIfMatch(req.get('if-match'));
      await write(req, res, { kind: 'delete', id: idOf(req), ...(ifMatch === undefined ? {} : { ifMatch }) });
    });

  async function update(req: Request, res: Response): Promise<void> {
    const ifMatch = parseIfMatch(req.get('if-match'));
    const body = validateUpdate(modelOf(req), jsonBodyOf(req));
    await write(req, res, {
      kind: 'update',
      id: idOf(req),
      body,
      ...(ifMatch === undefined ? {} : { ifMatch }),
    });
  }

  async function write(req: Request, res: Response, request: WriteRequest): Promise<void> {
    const model = modelOf(req);
    const { orgId, clientId, scopes } = authOf(req);
    const key = parseIdempotencyKey(req.get('idempotency-key'));
    const idempotent =
      key === undefined
        ? undefined
        : {
            key,
            hash: requestHash(req.method, `${model.name}/${paramOf(req, 'id')}`, req.body),
            respond: respondTo(req),
          };
    if (idempotent) {
      const replay = await deps.idempotency.find(orgId, idempotent.key, idempotent.hash);
      if (replay) {
        send(res, replay, { 'Idempotent-Replayed': 'true' });
        return;
      }
    }
    const outcome = await deps.commands.write(
      model,
      { orgId, actor: clientId, requestId: req.id, by: { kind: 'client', scopes } },
      request,
      idempotent,
    );
    if (prefersAsync(req.get('prefer'))) {
      res.setHeader('Preference-Applied', 'respond-async');
    } else if (outcome.written) {
      for (const { streamId, version } of [outcome.written, ...outcome.written.also])
        await deps.waiter.waitFor(streamId, version);
    }
    send(res, respondTo(req)(outcome));
  }

  return router;
}

/** The response of a write, as stored for Idempotency-Key replays. */
function respondTo(req: Request): (outcome: WriteOutcome) => StoredResponse {
  return (outcome) => {
    const headers: Record<string, string> = { ETag: etagOf(outcome.record.version) };
    if (outcome.created) headers.Location = `${req.baseUrl}/${paramOf(req, 'model')}/${outcome.record.id}`;
    return { status: outcome.created ? 201 : 200, headers, body: singleEnvelope(outcome.record) };
  };
}

function send(res: Response, response: StoredResponse, extraHeaders: Record<string, string> = {}): void {
  for (const [name, value] of Object.entries({ ...response.headers, ...extraHeaders }))
    res.setHeader(name, value);
  res.status(response.status).json(response.body);
}

/** A route parameter (express 5 types them as possibly repeated; these routes never repeat one). */
function paramOf(req: Request, name: 'model' | 'id'): string {
  const value = req.params[name];
  return typeof value === 'string' ? value : '';
}

function modelOf(req: Request): ModelDefinition {
  const name = paramOf(req, 'model');
  const model = findModel(name);
  if (!model) throw baseError('NotFound', `Unknown model ${name}`);
  return model;
}

function idOf(req: Request): number {
  return recordIdOf(paramOf(req, 'id'), modelOf(req).singular);
}

/**
 * Passes the methods the model answers on this path and refuses the others (OPTIONS and the like
 * included) with a 405 naming them in `Allow`: invoices and shipments are not deleted, inventory is
 * read-only, adjustments are append-only.
 */
function allowed(path: 'collection' | 'record'): RequestHandler {
  return (req, _res, next) => {
    const methods = allowedMethods(modelOf(req), path);
    if (methods.includes(req.method) || (req.method === 'HEAD' && methods.includes('GET'))) {
      next();
      return;
    }
    throw baseError('MethodNotAllowed', `${req.method} is not allowed here`, { Allow: methods.join(', ') });
  };
}
