import { baseError, singleEnvelope } from '@ofp/contracts';
import type { AdmittedHook, AuthContext, BearerGate, Scope } from '@ofp/auth-tokens';
import {
  MODELS,
  allowedMethods,
  searchParameter,
  searchEnvelopeSchema,
  singleEnvelopeSchema,
  validateCreate,
  validateUpdate,
  writeSchema,
  type ModelDefinition,
} from '@ofp/models';
import {
  etagOf,
  noneMatchHits,
  parseIdempotencyKey,
  parseIfMatch,
  prefersAsync,
  recordIdOf,
  requestHash,
  type HttpMethod,
  type IdempotencyStore,
  type Reply,
  type Route,
  type RouteRequest,
  type StoredResponse,
} from '@ofp/runtime';
import type { RecordCommands, WriteOutcome, WriteRequest } from '../commands/record-commands.js';
import type { ReadYourWrites } from '../queries/read-your-writes.js';
import { searchEnvelopeJson, singleEnvelopeJson, type RecordQueries } from '../queries/record-queries.js';

export interface ApiRoutesDependencies {
  readonly commands: RecordCommands;
  readonly queries: RecordQueries;
  readonly readYourWrites: ReadYourWrites;
  readonly idempotency: IdempotencyStore;
  /** Bearer verification and the client's rate limit. */
  readonly gate: BearerGate;
  /** Every organization has its seed records (phone number types) before its first request is served. */
  readonly seed: AdmittedHook;
}

type ApiRoute = Route<AuthContext>;

/**
 * The api's part of the route table: for every model of the registry, its search and record reads
 * (API.md §4) and the writes its access allows (API.md §5-§6), under `/v2` (and `/api/v2`). Every
 * route needs a token; reads the `read` scope, writes the model's write scope, or `operations` for a
 * model with operator changes (the decided change then names the exact scopes it needs, API.md §7).
 */
export function apiRoutes(deps: ApiRoutesDependencies): ApiRoute[] {
  return Object.values(MODELS).flatMap((model) => modelRoutes(model, deps));
}

function modelRoutes(model: ModelDefinition, deps: ApiRoutesDependencies): ApiRoute[] {
  const reads = deps.gate.access(['read'], deps.seed);
  const writeScopes: Scope[] = model.operatorChanges ? [model.writeScope, 'operations'] : [model.writeScope];
  const writes = deps.gate.access([...new Set(writeScopes)], deps.seed);
  const collection = `/v2/${model.name}`;
  const record = `${collection}/{id}`;
  const name = model.name;
  const routes: ApiRoute[] = [
    {
      method: 'GET',
      path: collection,
      operationId: `${name}.search`,
      summary: `Search ${name.replace(/_/g, ' ')}`,
      tag: name,
      model: name,
      access: reads,
      query: { names: ['q'], schemas: { q: searchParameter(model) } },
      responses: { 200: { description: 'A page of records', schema: searchEnvelopeSchema(model) } },
      handle: async (request) => {
        const page = await deps.queries.search(model, request.principal.orgId, request.query.q);
        return { status: 200, body: searchEnvelopeJson(page) };
      },
    },
    {
      method: 'GET',
      path: record,
      operationId: `${name}.get`,
      summary: `Get one ${model.singular.replace(/_/g, ' ')}`,
      tag: name,
      model: name,
      access: reads,
      headers: ['If-None-Match'],
      responses: {
        200: { description: 'The record', headers: ['ETag'], schema: singleEnvelopeSchema(model) },
        304: { description: 'Not modified', headers: ['ETag'] },
      },
      errors: [404],
      handle: async (request) => {
        const id = recordIdOf(request.params.id, model.singular);
        const found = await deps.queries.get(model, request.principal.orgId, id);
        if (!found) throw baseError('NotFound', `${model.singular} ${id} not found`);
        const etag = etagOf(found.version);
        if (noneMatchHits(request.header('if-none-match'), etag))
          return { status: 304, headers: { ETag: etag } };
        return { status: 200, headers: { ETag: etag }, body: singleEnvelopeJson(found) };
      },
    },
  ];
  const writeRoute = (
    method: HttpMethod,
    path: string,
    operation: string,
    summary: string,
    handle: WriteHandler,
  ) => {
    const creates = operation === 'create' || operation === 'createAt';
    routes.push({
      method,
      path,
      operationId: `${name}.${operation}`,
      summary,
      tag: name,
      model: name,
      access: writes,
      ...(method === 'DELETE' ? {} : { body: 'json' as const }),
      headers: ['Idempotency-Key', 'Prefer', ...(creates ? [] : (['If-Match'] as const))],
      ...(method === 'DELETE' ? {} : { request: writeSchema(model, creates ? 'create' : 'update') }),
      responses: creates
        ? {
            201: {
              description: 'Created',
              headers: ['Location', 'ETag', 'Idempotent-Replayed', 'Preference-Applied'],
              schema: singleEnvelopeSchema(model),
            },
          }
        : {
            200: {
              description: method === 'DELETE' ? 'The deleted record' : 'The record',
              headers: ['ETag', 'Idempotent-Replayed', 'Preference-Applied'],
              schema: singleEnvelopeSchema(model),
            },
          },
      errors: creates ? [409, 413, 415, 422] : [404, 409, 412, 413, 415, 422],
      handle: (request) => write(deps, model, request, handle(request)),
    });
  };
  const allowed = (path: 'collection' | 'record', method: HttpMethod) =>
    allowedMethods(model, path).includes(method);
  const singular = model.singular.replace(/_/g, ' ');
  if (allowed('collection', 'POST'))
    writeRoute('POST', collection, 'create', `Create a ${singular}`, (request) => ({
      kind: 'create',
      body: validateCreate(model, request.body),
    }));
  if (allowed('record', 'POST'))
    writeRoute('POST', record, 'createAt', `Create a ${singular} at a chosen id`, (request) => ({
      kind: 'create',
      id: idOf(model, request),
      body: validateCreate(model, request.body),
    }));
  const update: WriteHandler = (request) => {
    const pinned = ifMatchOf(request);
    return { kind: 'update', id: idOf(model, request), body: validateUpdate(model, request.body), ...pinned };
  };
  if (allowed('record', 'PUT')) writeRoute('PUT', record, 'update', `Update a ${singular}`, update);
  if (allowed('record', 'PATCH'))
    writeRoute('PATCH', record, 'patch', `Update a ${singular} (same as PUT)`, update);
  if (allowed('record', 'DELETE'))
    writeRoute('DELETE', record, 'delete', `Delete a ${singular}`, (request) => ({
      kind: 'delete',
      id: idOf(model, request),
      ...ifMatchOf(request),
    }));
  return routes;
}

type WriteHandler = (request: RouteRequest<AuthContext>) => WriteRequest;

/**
 * A write: an Idempotency-Key's stored response replayed, else the command run (its response stored
 * with the change when a key was given), then, unless the client prefers not to wait, the answer held
 * until the read model shows what was written and what it derives (API.md §5).
 */
async function write(
  deps: ApiRoutesDependencies,
  model: ModelDefinition,
  request: RouteRequest<AuthContext>,
  command: WriteRequest,
): Promise<Reply> {
  const { orgId, clientId, scopes } = request.principal;
  const key = parseIdempotencyKey(request.header('idempotency-key'));
  const location = `${request.prefix}/v2/${model.name}`;
  const respond = (outcome: WriteOutcome): StoredResponse => {
    const headers: Record<string, string> = { ETag: etagOf(outcome.record.version) };
    if (outcome.created) headers.Location = `${location}/${outcome.record.id}`;
    return {
      status: outcome.created ? 201 : 200,
      headers,
      body: JSON.stringify(singleEnvelope(outcome.record)),
    };
  };
  const idempotent =
    key === undefined
      ? undefined
      : {
          key,
          hash: requestHash(request.method, `${model.name}/${request.params.id ?? ''}`, request.body),
          respond,
        };
  if (idempotent) {
    const replay = await deps.idempotency.find(orgId, idempotent.key, idempotent.hash);
    if (replay) return { ...replay, headers: { ...replay.headers, 'Idempotent-Replayed': 'true' } };
  }
  const outcome = await deps.commands.write(
    model,
    {
      orgId,
      actor: clientId,
      requestId: request.id,
      traceparent: request.traceparent(),
      by: { kind: 'client', scopes },
    },
    command,
    idempotent,
  );
  const response = respond(outcome);
  if (prefersAsync(request.header('prefer'))) {
    return { ...response, headers: { ...response.headers, 'Preference-Applied': 'respond-async' } };
  }
  await deps.readYourWrites.settle(outcome.written);
  return response;
}

function idOf(model: ModelDefinition, request: RouteRequest): number {
  return recordIdOf(request.params.id, model.singular);
}

function ifMatchOf(request: RouteRequest): { ifMatch?: number } {
  const ifMatch = parseIfMatch(request.header('if-match'));
  return ifMatch === undefined ? {} : { ifMatch };
}
