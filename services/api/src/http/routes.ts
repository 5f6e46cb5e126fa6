import { baseError, singleEnvelope } from '@ofp/contracts';
import type { AuthContext, Scope } from '@ofp/auth-tokens';
import {
  MODELS,
  allowedMethods,
  searchDescription,
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
  parseIfMatch,
  recordIdOf,
  type HttpMethod,
  type Operation,
  type Operations,
  type Reply,
  type RouteRequest,
  type RouteSpec,
} from '@ofp/http-api';
import type { RecordCommands, WriteOutcome, WriteRequest } from '../commands/record-commands.js';
import type { ReadYourWrites } from '../queries/read-your-writes.js';
import { searchEnvelopeJson, singleEnvelopeJson, type RecordQueries } from '../queries/record-queries.js';

export interface ApiRoutesDependencies {
  readonly commands: RecordCommands;
  readonly queries: RecordQueries;
  readonly readYourWrites: ReadYourWrites;
}

type Request = RouteRequest<AuthContext>;

/** The operations of a model: one of each its access allows (`allowedMethods`). */
type OperationKind = 'search' | 'get' | 'create' | 'createAt' | 'update' | 'patch' | 'delete';

interface ModelOperation {
  readonly kind: OperationKind;
  readonly method: HttpMethod;
  readonly path: string;
  readonly summary: string;
  /** What it does, in the reference; a write's gets {@link writeNotes} after it. */
  readonly description: string;
}

/** What every read of a model does past a write's wait, in the reference (API.md §5). */
const READ_NOTE =
  "It shows every write the organization was answered for. A write answered before the read model showed it (its wait ran out) holds the organization's reads until it does: they wait up to 2 s, then answer 503 with `Retry-After`.";

function modelOperations(model: ModelDefinition): ModelOperation[] {
  const collection = `/v2/${model.name}`;
  const record = `${collection}/{id}`;
  const singular = model.singular.replace(/_/g, ' ');
  const allowed = (path: 'collection' | 'record', method: HttpMethod) =>
    allowedMethods(model, path).includes(method);
  const changes = `Changes the fields given; those left out keep their value, and a nested list given replaces the old one in full. A change that changes nothing answers the record as it is (same version, no event). With \`If-Match: W/"<version>"\` it applies to that version only, else 412.`;
  const operations: (ModelOperation | false)[] = [
    {
      kind: 'search',
      method: 'GET',
      path: collection,
      summary: `Search ${model.name.replace(/_/g, ' ')}`,
      description: `${searchDescription(model)} ${READ_NOTE}`,
    },
    {
      kind: 'get',
      method: 'GET',
      path: record,
      summary: `Get one ${singular}`,
      description: `Reads one ${singular} by its id. Its \`ETag\` is its version (\`W/"<version>"\`): with \`If-None-Match\` naming it, the answer is a 304 without a body while the record is unchanged. Needs the \`read\` scope. ${READ_NOTE}`,
    },
    allowed('collection', 'POST') && {
      kind: 'create',
      method: 'POST',
      path: collection,
      summary: `Create a ${singular}`,
      description: `Creates a ${singular}, its id chosen by the platform.`,
    },
    allowed('record', 'POST') && {
      kind: 'createAt',
      method: 'POST',
      path: record,
      summary: `Create a ${singular} at a chosen id`,
      description: `Creates a ${singular} at the id in the path, for records that keep the id another system gave them; 409 when that id is taken.`,
    },
    allowed('record', 'PUT') && {
      kind: 'update',
      method: 'PUT',
      path: record,
      summary: `Update a ${singular}`,
      description: changes,
    },
    allowed('record', 'PATCH') && {
      kind: 'patch',
      method: 'PATCH',
      path: record,
      summary: `Update a ${singular} (same as PUT)`,
      description: changes,
    },
    allowed('record', 'DELETE') && {
      kind: 'delete',
      method: 'DELETE',
      path: record,
      summary: `Delete a ${singular}`,
      description: `Deletes a ${singular}. A delete is a change too: it has a version and an event of its own. With \`If-Match: W/"<version>"\` it applies to that version only, else 412.`,
    },
  ];
  return operations.filter((operation) => operation !== false);
}

/** A model's write scopes: its own, and `operations` where operators change it (the decider checks which). */
function writeScopesOf(model: ModelDefinition): Scope[] {
  return [...new Set<Scope>(model.operatorChanges ? [model.writeScope, 'operations'] : [model.writeScope])];
}

/** What every write of a model does, in the reference: after the write's own description. */
function writeNotes(model: ModelDefinition): string {
  return `An \`Idempotency-Key\` makes a retry safe: the same key and body within 24 h answer the first response again (\`Idempotent-Replayed: true\`). The answer comes once searches and reads show the change and everything it derives, or as soon as the change is durable with \`Prefer: respond-async\`. Needs ${writeScopesOf(
    model,
  )
    .map((scope) => `the \`${scope}\` scope`)
    .join(' or ')}.`;
}

/**
 * The api's part of the route table as data: for every model of the registry, its search and record
 * reads (API.md §4) and the writes its access allows (API.md §5-§6), under `/v2` (and `/api/v2`).
 * Every route needs a token; reads the `read` scope, writes the model's write scope, or `operations`
 * for a model with operator changes (the decided change then names the exact scopes it needs, API.md
 * §7).
 */
export function apiRouteSpecs(): RouteSpec[] {
  return Object.values(MODELS).flatMap((model) =>
    modelOperations(model).map(({ kind, method, path, summary, description }): RouteSpec => {
      const base = {
        method,
        path,
        operationId: `${model.name}.${kind}`,
        summary,
        description,
        tag: model.name,
        model: model.name,
        ...(model.instead ? { refused: model.instead } : {}),
      };
      if (kind === 'search')
        return {
          ...base,
          access: { kind: 'bearer', scopes: ['read'] },
          query: { names: ['q'], schemas: { q: searchParameter(model) } },
          responses: { 200: { description: 'A page of records', schema: searchEnvelopeSchema(model) } },
        };
      if (kind === 'get')
        return {
          ...base,
          access: { kind: 'bearer', scopes: ['read'] },
          headers: ['If-None-Match'],
          responses: {
            200: { description: 'The record', headers: ['ETag'], schema: singleEnvelopeSchema(model) },
            304: { description: 'Not modified', headers: ['ETag'] },
          },
          errors: [404],
        };
      const creates = kind === 'create' || kind === 'createAt';
      return {
        ...base,
        description: `${description} ${writeNotes(model)}`,
        access: { kind: 'bearer', scopes: writeScopesOf(model) },
        headers: creates ? ['Idempotency-Key', 'Prefer'] : ['Idempotency-Key', 'Prefer', 'If-Match'],
        ...(method === 'DELETE'
          ? {}
          : { body: 'json' as const, request: writeSchema(model, creates ? 'create' : 'update') }),
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
      };
    }),
  );
}

/** What serves {@link apiRouteSpecs}, by operationId. */
export function apiOperations(deps: ApiRoutesDependencies): Operations {
  return Object.fromEntries(
    Object.values(MODELS).flatMap((model) =>
      modelOperations(model).map(({ kind }) => [`${model.name}.${kind}`, modelOperation(model, kind, deps)]),
    ),
  );
}

function modelOperation(
  model: ModelDefinition,
  kind: OperationKind,
  deps: ApiRoutesDependencies,
): Operation<AuthContext> {
  const writing = (command: WriteHandler): Operation<AuthContext> => ({
    handle: (request) => write(deps, model, request, command(request)),
  });
  const update: WriteHandler = (request) => ({
    kind: 'update',
    id: idOf(model, request),
    body: validateUpdate(model, request.body),
    ...ifMatchOf(request),
  });
  switch (kind) {
    case 'search':
      return {
        handle: async (request) => {
          const page = await deps.queries.search(model, request.principal.orgId, request.query.q);
          return { status: 200, body: searchEnvelopeJson(page) };
        },
      };
    case 'get':
      return {
        handle: async (request) => {
          const id = recordIdOf(request.params.id, model.singular);
          const found = await deps.queries.get(model, request.principal.orgId, id);
          if (!found) throw baseError('NotFound', `${model.singular} ${id} not found`);
          const etag = etagOf(found.version);
          if (noneMatchHits(request.header('if-none-match'), etag))
            return { status: 304, headers: { ETag: etag } };
          return { status: 200, headers: { ETag: etag }, body: singleEnvelopeJson(found) };
        },
      };
    case 'create':
      return writing((request) => ({ kind: 'create', body: validateCreate(model, request.body) }));
    case 'createAt':
      return writing((request) => ({
        kind: 'create',
        id: idOf(model, request),
        body: validateCreate(model, request.body),
      }));
    case 'update':
    case 'patch':
      return writing(update);
    case 'delete':
      return writing((request) => ({ kind: 'delete', id: idOf(model, request), ...ifMatchOf(request) }));
    default: {
      const unhandled: never = kind;
      throw new Error(`unhandled operation ${String(unhandled)}`);
    }
  }
}

type WriteHandler = (request: Request) => WriteRequest;

/**
 * A write: the command run (its response recorded with the change when the request has an
 * Idempotency-Key, which the pipeline keeps), then, unless the client prefers not to wait, the answer
 * held until the read model shows what was written and what it derives (API.md §5).
 */
async function write(
  deps: ApiRoutesDependencies,
  model: ModelDefinition,
  request: RouteRequest<AuthContext>,
  command: WriteRequest,
): Promise<Reply> {
  const { orgId, clientId, scopes } = request.principal;
  const location = `${request.prefix}/v2/${model.name}`;
  const respond = (outcome: WriteOutcome): Reply => {
    const headers: Record<string, string> = { ETag: etagOf(outcome.record.version) };
    if (outcome.created) headers.Location = `${location}/${outcome.record.id}`;
    return {
      status: outcome.created ? 201 : 200,
      headers,
      body: JSON.stringify(singleEnvelope(outcome.record)),
    };
  };
  const { idempotency } = request;
  const since = deps.readYourWrites.mark();
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
    idempotency && ((client, written) => idempotency.record(client, respond(written))),
  );
  if (!request.respondAsync) await deps.readYourWrites.settle(outcome.written, since);
  return respond(outcome);
}

function idOf(model: ModelDefinition, request: RouteRequest): number {
  return recordIdOf(request.params.id, model.singular);
}

function ifMatchOf(request: RouteRequest): { ifMatch?: readonly number[] } {
  const ifMatch = parseIfMatch(request.header('if-match'));
  return ifMatch === undefined ? {} : { ifMatch };
}
