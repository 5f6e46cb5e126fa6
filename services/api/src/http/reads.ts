import type { IncomingMessage, ServerResponse } from 'node:http';
import { baseError } from '@ofp/contracts';
import { checkScope, type BearerGate } from '@ofp/auth-tokens';
import { findModel, type ModelDefinition } from '@ofp/models';
import { etagOf, noneMatchHits, recordIdOf, writeJson, type FastRoutes } from '@ofp/runtime';
import type { TenantSeeder } from '../commands/tenant-seeder.js';
import { searchEnvelopeJson, singleEnvelopeJson, type RecordQueries } from '../queries/record-queries.js';

export interface ReadRoutesDependencies {
  readonly queries: RecordQueries;
  readonly tenants: TenantSeeder;
  readonly gate: BearerGate;
}

// `/v2/<model>` or `/v2/<model>/<id>`, also under `/api`, with an optional trailing slash and query.
const READ_PATH = /^(\/api)?\/v2\/([^/?]+)(?:\/([^/?]+))?\/?(?:\?(.*))?$/i;

/**
 * The api's reads (API.md §4): `GET` and `HEAD` of `/v2/<model>` (search) and `/v2/<model>/<id>`, also
 * under `/api/v2`, served ahead of express (see `FastRoutes`): integrators poll them, and express's
 * own work per request costs more than a search's statement. They pass the same gate as every `/v2`
 * request (bearer token, rate limit), then need the `read` scope. Paths that name no model of the
 * registry (webhooks are the dispatcher's) or do not decode are left to express.
 */
export function readRoutes(deps: ReadRoutesDependencies): FastRoutes {
  return (req) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') return undefined;
    const match = READ_PATH.exec(req.url ?? '');
    if (!match) return undefined;
    const [, api = '', modelSegment = '', idSegment, search = ''] = match;
    const model = findModel(decoded(modelSegment) ?? '');
    const id = idSegment === undefined ? undefined : decoded(idSegment);
    if (!model || id === null) return undefined;
    const prefix = `${api.toLowerCase()}/v2`;
    return id === undefined
      ? { route: `${prefix}/:model`, handle: (r, res) => searchOf(model, r, res, search) }
      : { route: `${prefix}/:model/:id`, handle: (r, res) => recordOf(model, r, res, id) };
  };

  /** The organization reading: the request passed the gate and may read. */
  async function readerOf(req: IncomingMessage, res: ServerResponse): Promise<number> {
    const { auth, headers } = await deps.gate.pass(req.headers.authorization);
    for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
    // Every organization has its seed records (phone number types) before its first request is served.
    await deps.tenants.ensureSeeded(auth.orgId);
    checkScope(auth, 'read');
    return auth.orgId;
  }

  async function searchOf(
    model: ModelDefinition,
    req: IncomingMessage,
    res: ServerResponse,
    search: string,
  ): Promise<void> {
    const orgId = await readerOf(req, res);
    const q = new URLSearchParams(search).getAll('q');
    if (q.length > 1) throw baseError('Invalid', 'q must be given once');
    writeJson(res, 200, searchEnvelopeJson(await deps.queries.search(model, orgId, q[0])));
  }

  async function recordOf(
    model: ModelDefinition,
    req: IncomingMessage,
    res: ServerResponse,
    id: string,
  ): Promise<void> {
    const orgId = await readerOf(req, res);
    const record = await deps.queries.get(model, orgId, recordIdOf(id, model.singular));
    if (!record) throw baseError('NotFound', `${model.singular} ${id} not found`);
    const etag = etagOf(record.version);
    if (noneMatchHits(req.headers['if-none-match'], etag)) {
      res.writeHead(304, { ETag: etag }).end();
      return;
    }
    writeJson(res, 200, singleEnvelopeJson(record), { ETag: etag });
  }
}

/** A decoded path segment, or null when it is not valid percent-encoding. */
function decoded(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}
