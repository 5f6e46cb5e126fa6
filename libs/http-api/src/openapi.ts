import { z } from 'zod';
import type { RouteSpec } from './routes.js';

/** What the description says besides its routes. */
export interface OpenApiOptions {
  readonly title: string;
  readonly version: string;
  readonly description: string;
  /** The public base URL. */
  readonly server: string;
  /** The OAuth 2.0 scopes (API.md §7) and what each allows. */
  readonly scopes: Readonly<Record<string, string>>;
  /** Schemas of the error envelope (API.md §2) and of OAuth's errors (RFC 6749 §5.2). */
  readonly errorSchema: z.ZodType;
  readonly oauthErrorSchema: z.ZodType;
  /** The webhook events (API.md §8): one entry each, with the body its deliveries carry. */
  readonly webhooks: readonly {
    readonly type: string;
    readonly description: string;
    readonly payload: z.ZodType;
  }[];
  /** Tags in the order the reference shows them, with their descriptions. */
  readonly tags: readonly { readonly name: string; readonly description: string }[];
}

type Json = Record<string, unknown>;

/** The headers every response carries, or that the operations that declare them take (API.md §3-§5). */
const HEADERS: Readonly<Record<string, Json>> = {
  'X-Request-Id': {
    description: 'The request id: echoed when the request sent a usable one (1 to 200 printable characters)',
    schema: { type: 'string' },
  },
  ETag: { description: 'W/"<version>" of the record', schema: { type: 'string', pattern: '^W/"\\d+"$' } },
  Location: { description: 'The created record', schema: { type: 'string' } },
  'RateLimit-Limit': { description: "The client's bucket capacity", schema: { type: 'integer' } },
  'RateLimit-Remaining': { description: 'Requests left in the bucket', schema: { type: 'integer' } },
  'RateLimit-Reset': { description: 'Seconds until the bucket is full again', schema: { type: 'integer' } },
  'Retry-After': { description: 'Seconds to wait before trying again', schema: { type: 'integer' } },
  'Idempotent-Replayed': {
    description: "`true` on a replay of an Idempotency-Key's first response",
    schema: { type: 'string' },
  },
  'Preference-Applied': {
    description: '`respond-async` when the request asked for it',
    schema: { type: 'string' },
  },
  'WWW-Authenticate': { description: 'The RFC 6750 §3 challenge', schema: { type: 'string' } },
  'Cache-Control': { description: 'Caching of the response', schema: { type: 'string' } },
};

/** Request headers, as the parameters an operation declares. */
const REQUEST_HEADERS: Readonly<Record<string, Json>> = {
  'Idempotency-Key': {
    name: 'Idempotency-Key',
    in: 'header',
    description:
      'Names one request: the same request with the same key within 24 hours gets the first response again (API.md §5), so make a fresh key (a UUID) for each request you mean; the key used with another request is a 422. 1 to 255 printable ASCII characters; spaces may not begin or end it, as an HTTP field value never does',
    schema: {
      type: 'string',
      minLength: 1,
      maxLength: 255,
      pattern: '^[\\x21-\\x7e]([\\x20-\\x7e]*[\\x21-\\x7e])?$',
    },
  },
  'If-Match': {
    name: 'If-Match',
    in: 'header',
    description:
      'W/"<version>" (or a list of such tags, RFC 9110 §13.1.1): the change applies only to that version (one of them), else 412; `*` applies to any',
    schema: { type: 'string' },
  },
  'If-None-Match': {
    name: 'If-None-Match',
    in: 'header',
    description: 'W/"<version>": 304 when the record is still at that version',
    schema: { type: 'string' },
  },
  Prefer: {
    name: 'Prefer',
    in: 'header',
    description: '`respond-async`: answer once the change is durable, without waiting for reads to show it',
    schema: { type: 'string' },
  },
  'X-Request-Id': {
    name: 'X-Request-Id',
    in: 'header',
    description:
      'An id for the request, echoed in the response and the logs when it is 1 to 200 printable ASCII characters (else the server makes one)',
    schema: { type: 'string' },
  },
};

/** The headers of a webhook delivery (API.md §8, Standard Webhooks). */
const DELIVERY_HEADERS: readonly Json[] = [
  {
    name: 'webhook-id',
    in: 'header',
    required: true,
    description: 'The event id, the same on every attempt: deduplicate on it',
    schema: { type: 'string', format: 'uuid' },
  },
  {
    name: 'webhook-timestamp',
    in: 'header',
    required: true,
    description: 'When this attempt was signed, in Unix seconds: refuse one too far from your clock',
    schema: { type: 'string', pattern: '^\\d+$' },
  },
  {
    name: 'webhook-signature',
    in: 'header',
    required: true,
    description:
      'v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}"> with the secret; during a rotation both signatures, space-separated',
    schema: { type: 'string', pattern: '^v1,[A-Za-z0-9+/=]+( v1,[A-Za-z0-9+/=]+)*$' },
  },
  {
    name: 'traceparent',
    in: 'header',
    description: 'The W3C Trace Context of the change, when it was made inside a trace',
    schema: { type: 'string' },
  },
];

const RATE_LIMIT_HEADERS = ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'];

const STATUS_TEXT: Readonly<Record<number, string>> = {
  400: 'Malformed request: bad JSON, an invalid q, an unknown query parameter',
  401: 'Missing, malformed, forged, revoked or expired credentials',
  403: 'The token lacks the scope for this action',
  404: 'Unknown record (another organization’s records are unknown too)',
  409: 'Conflict: a duplicate unique value, a taken id, an invalid state transition',
  410: 'The cursor is older than what the feed keeps: start again without it',
  412: 'If-Match does not match the current ETag',
  413: 'Body over 1 MiB',
  415: 'The body is not application/json',
  422: 'Field validation failed: errors by column path',
  429: 'Rate limited',
  431: 'The request line and headers exceed 64 KiB (a q far beyond its 8 KiB)',
  500: 'Unexpected error (its message names the request id)',
  503: 'Not ready, or a dependency is unavailable',
};

/** A form body's 413: an OAuth request is a few parameters. */
const FORM_TOO_LARGE = 'Form body over 64 KiB';

/**
 * The OpenAPI 3.1 document of a route table (API.md §11), generated from the same declarations that
 * route and validate requests: paths and operations from the routes, request and response bodies from
 * their zod schemas (zod's JSON Schema output; schemas with an id become `components.schemas`), the
 * security schemes of their access, the errors every operation may answer, and one `webhooks` entry
 * per event type.
 */
export function openApiDocument(routes: readonly RouteSpec[], options: OpenApiOptions): Json {
  const schemas = new ComponentSchemas('draft-2020-12');
  const paths: Record<string, Record<string, Json>> = {};
  for (const route of routes) {
    (paths[route.path] ??= {})[route.method.toLowerCase()] = operation(route, schemas, options);
  }
  for (const route of routes) {
    const links = linksOf(route, routes);
    if (links !== undefined)
      (paths[route.path]![route.method.toLowerCase()]!.responses as Record<string, Json>)['201']!.links =
        links;
  }
  const webhooks: Record<string, Json> = {};
  for (const event of options.webhooks) {
    webhooks[event.type] = {
      post: {
        operationId: `webhook.${event.type}`,
        summary: event.type,
        description: `${event.description}. Signed per Standard Webhooks (webhook-id, webhook-timestamp, webhook-signature); a 2xx within 15 s acknowledges it.`,
        tags: ['Webhook events'],
        // The platform calls the subscriber: the signature headers, not a token, prove who sends.
        security: [],
        parameters: DELIVERY_HEADERS,
        requestBody: {
          required: true,
          content: { 'application/json': { schema: schemas.add(event.payload, 'output') } },
        },
        responses: { '2XX': { description: 'Received' } },
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: options.title, version: options.version, description: options.description },
    servers: [{ url: options.server }],
    tags: [
      ...options.tags,
      { name: 'Webhook events', description: 'What the platform POSTs to subscribed endpoints' },
    ],
    paths,
    webhooks,
    components: {
      schemas: schemas.components(),
      headers: HEADERS,
      parameters: REQUEST_HEADERS,
      securitySchemes: usedSchemes(routes, {
        oauth2: {
          type: 'oauth2',
          description: 'RS256 JWT access tokens, valid 10,800 s (API.md §7)',
          flows: {
            authorizationCode: {
              authorizationUrl: `${options.server}/oauth/authorize`,
              tokenUrl: `${options.server}/oauth/token`,
              refreshUrl: `${options.server}/oauth/token`,
              scopes: options.scopes,
            },
            clientCredentials: { tokenUrl: `${options.server}/oauth/token`, scopes: options.scopes },
          },
        },
        clientBasic: {
          type: 'http',
          scheme: 'basic',
          description:
            'OAuth client credentials (RFC 6749 §2.3.1); client_id and client_secret in the form work too',
        },
        adminToken: {
          type: 'http',
          scheme: 'bearer',
          description: "The deployment's admin token (API.md §10)",
        },
      }),
    },
  };
}

/** The security schemes that some operation names. */
function usedSchemes(routes: readonly RouteSpec[], schemes: Record<string, Json>): Record<string, Json> {
  const used = new Set(routes.flatMap((route) => securityOf(route).flatMap((entry) => Object.keys(entry))));
  return Object.fromEntries(Object.entries(schemes).filter(([name]) => used.has(name)));
}

/** What the path parameters name. */
const PATH_PARAMETERS: Readonly<Record<string, string>> = {
  id: "The record's id",
  client_id: "The client's `client_id`",
};

function operation(route: RouteSpec, schemas: ComponentSchemas, options: OpenApiOptions): Json {
  const parameters: Json[] = [];
  for (const name of route.path.match(/\{(\w+)\}/g) ?? []) {
    const param = name.slice(1, -1);
    parameters.push({
      name: param,
      in: 'path',
      required: true,
      description: PATH_PARAMETERS[param] ?? `The ${param.replace(/_/g, ' ')}`,
      schema:
        param === 'id'
          ? { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER }
          : { type: 'string' },
    });
  }
  if (route.query !== undefined && route.query !== 'any') {
    for (const name of route.query.names) {
      const parameter = route.query.schemas?.[name];
      if (parameter === undefined) {
        parameters.push({ name, in: 'query', schema: { type: 'string' } });
        continue;
      }
      const schema = schemas.add(parameter.schema, 'input');
      const examples = parameter.examples && {
        examples: Object.fromEntries(
          Object.entries(parameter.examples).map(([key, { summary, value }]) => [key, { summary, value }]),
        ),
      };
      // An operation reads each parameter as one string: a list is its values comma-separated.
      const list = (schema as { type?: unknown }).type === 'array' ? { style: 'form', explode: false } : {};
      parameters.push({
        name,
        in: 'query',
        description: parameter.description,
        ...(parameter.json
          ? { content: { 'application/json': { schema, ...examples } } }
          : { ...list, schema, ...examples }),
      });
    }
  }
  for (const header of [...(route.headers ?? []), 'X-Request-Id'])
    parameters.push({ $ref: `#/components/parameters/${header}` });

  const responses: Record<string, Json> = {};
  // Every response to an admitted request carries the client's bucket (API.md §3); a request
  // refused before admission does not: one without valid credentials, and at the OAuth endpoints, whose
  // credentials may be in the form body, one whose body could not be read.
  const limited = route.access.kind === 'bearer' || route.access.kind === 'client';
  const beforeAdmission = route.access.kind === 'client' ? [401, 413, 415] : [401];
  const rateLimit = (status: number) =>
    limited && !beforeAdmission.includes(status) ? RATE_LIMIT_HEADERS : [];
  for (const [status, response] of Object.entries(route.responses)) {
    const headers = Object.fromEntries(
      ['X-Request-Id', ...(response.headers ?? []), ...rateLimit(Number(status))].map((name) => [
        name,
        { $ref: `#/components/headers/${name}` },
      ]),
    );
    const content = response.schema
      ? { content: { 'application/json': { schema: schemas.add(response.schema, 'output') } } }
      : response.mediaType
        ? {
            content: {
              [response.mediaType]: {
                schema: response.mediaType === 'application/json' ? { type: 'object' } : { type: 'string' },
              },
            },
          }
        : {};
    responses[status] = { description: response.description, headers, ...content };
  }
  for (const status of errorStatuses(route)) {
    // A 431 is answered before any route is found, so always in the envelope.
    const oauth = route.errorFormat === 'oauth' && status !== 431;
    const headers: Record<string, Json> = { 'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' } };
    for (const name of rateLimit(status)) headers[name] = { $ref: `#/components/headers/${name}` };
    if (status === 401 || status === 403)
      headers['WWW-Authenticate'] = { $ref: '#/components/headers/WWW-Authenticate' };
    if (status === 429 || status === 503)
      headers['Retry-After'] = { $ref: '#/components/headers/Retry-After' };
    responses[String(status)] = {
      description:
        (status === 413 && route.body === 'form' ? FORM_TOO_LARGE : STATUS_TEXT[status]) ?? 'Error',
      headers,
      content: {
        'application/json': {
          schema: schemas.add(oauth ? options.oauthErrorSchema : options.errorSchema, 'output'),
        },
      },
    };
  }

  const body =
    route.body === 'json'
      ? {
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: route.request ? schemas.add(route.request, 'input') : { type: 'object' },
              },
            },
          },
        }
      : route.body === 'form'
        ? {
            requestBody: {
              required: true,
              content: {
                'application/x-www-form-urlencoded': {
                  schema: route.request ? schemas.add(route.request, 'input') : { type: 'object' },
                },
              },
            },
          }
        : {};
  return {
    operationId: route.operationId,
    summary: route.summary,
    description: route.description,
    tags: [route.tag],
    security: securityOf(route),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...body,
    responses,
  };
}

/**
 * The OpenAPI links of a create (`POST /v2/people` answering 201, or an action that makes a record of
 * another collection, its response's `creates`): to every operation on the record it made
 * (`/v2/people/{id}` and the actions under it), with the id as the envelope carries it (`results.id`,
 * API.md §2), so that a client or a fuzzer can follow a create to what takes its id. Creating at a
 * chosen id (`POST /v2/people/{id}`) is left out: the created id is taken.
 */
function linksOf(route: RouteSpec, routes: readonly RouteSpec[]): Json | undefined {
  const created = route.responses[201];
  if (route.method !== 'POST' || created === undefined) return undefined;
  const collection = created.creates ?? (route.path.includes('{') ? undefined : route.path);
  if (collection === undefined) return undefined;
  const record = `${collection}/{id}`;
  const targets = routes.filter(
    (target) =>
      (target.path === record || target.path.startsWith(`${record}/`)) &&
      !(target.method === 'POST' && target.path === record),
  );
  if (targets.length === 0) return undefined;
  return Object.fromEntries(
    targets.map((target) => [
      target.operationId,
      {
        operationId: target.operationId,
        parameters: { id: '$response.body#/results/id' },
        description: `${target.summary}: the record this request created`,
      },
    ]),
  );
}

/** Who may call: OpenAPI lists alternatives, so a token with any one of the scopes is one entry each. */
function securityOf(route: RouteSpec): Json[] {
  switch (route.access.kind) {
    case 'public':
      return [];
    case 'bearer': {
      const scopes = route.access.scopes ?? [];
      return scopes.length === 0 ? [{ oauth2: [] }] : scopes.map((scope) => ({ oauth2: [scope] }));
    }
    case 'client':
      return [{ clientBasic: [] }, {}];
    case 'admin':
      return [{ adminToken: [] }];
    default: {
      const unhandled: never = route.access.kind;
      throw new Error(`unknown access ${String(unhandled)}`);
    }
  }
}

/** The error statuses an operation may answer: what its access, parameters and body can fail on, and its own. */
function errorStatuses(route: RouteSpec): number[] {
  const statuses = new Set<number>(route.errors ?? []);
  const kind = route.access.kind;
  if (kind !== 'public') statuses.add(401);
  if (kind === 'bearer' || kind === 'client') statuses.add(429);
  if ((route.access.scopes ?? []).length > 0) statuses.add(403);
  // Any query parameter the operation does not declare is a 400 naming it (API.md §4).
  if (route.query !== 'any') statuses.add(400);
  // A query beyond the request-line limit never reaches the operation (API.md §4: q is at most 8 KiB).
  if (route.query !== undefined) statuses.add(431);
  // A path id that no record can have (0, `abc`) is a record that does not exist.
  if (route.path.includes('{')) statuses.add(404);
  if (route.body === 'json') {
    statuses.add(413);
    statuses.add(415);
  }
  if (route.body === 'form') statuses.add(413);
  if (route.path.startsWith('/v2/') || kind !== 'public') {
    statuses.add(500);
    statuses.add(503);
  }
  for (const status of Object.keys(route.responses)) statuses.delete(Number(status));
  return [...statuses].sort((a, b) => a - b);
}

/**
 * Converts zod schemas with zod's own JSON Schema output, and gathers the schemas that carry an id
 * (and what they reference) into `components.schemas`, as OpenAPI and AsyncAPI documents keep them.
 * Requests are described in their input form (defaults optional to send), responses in their output
 * form; an id is one or the other.
 */
export class ComponentSchemas {
  private readonly collected = new Map<string, Json>();

  /** `target`: the JSON Schema dialect of the document (OpenAPI 3.1: 2020-12; AsyncAPI 3: draft-07). */
  constructor(private readonly target: 'draft-2020-12' | 'draft-07') {}

  /**
   * The JSON Schema of `schema`, or a reference to it among the components when it has an id (its
   * own, or `name` for a schema built for the document alone: zod ids are global, one schema each).
   */
  add(schema: z.ZodType, io: 'input' | 'output' = 'output', name?: string): Json {
    const converted = z.toJSONSchema(schema, { io, unrepresentable: 'any', target: this.target }) as Json;
    const {
      $defs,
      definitions,
      $schema: _dialect,
      ...rest
    } = converted as Json & { $defs?: Record<string, Json>; definitions?: Record<string, Json> };
    // zod leaves the examples of a request schema that transforms (decimals) out of its input form.
    const { id = name, examples } = z.globalRegistry.get(schema) ?? {};
    const withExamples = (definition: Json): Json =>
      examples === undefined || definition.examples !== undefined ? definition : { ...definition, examples };
    for (const [defined, definition] of Object.entries({ ...$defs, ...definitions }))
      this.keep(defined, relocated(defined === id ? withExamples(definition) : definition));
    // A schema with an id comes back as a reference to itself among its definitions.
    if (id === undefined || typeof rest.$ref === 'string') return relocated(rest);
    this.keep(id, relocated(withExamples(rest)));
    return { $ref: `#/components/schemas/${id}` };
  }

  components(): Record<string, Json> {
    return Object.fromEntries([...this.collected].sort(([a], [b]) => a.localeCompare(b)));
  }

  private keep(id: string, definition: Json): void {
    const { id: _id, ...rest } = definition;
    const known = this.collected.get(id);
    if (known !== undefined && JSON.stringify(known) !== JSON.stringify(rest))
      throw new Error(`schema ${id} is described twice, differently (used as a request and as a response?)`);
    this.collected.set(id, rest);
  }
}

/** A converted schema with its `$defs` (or draft-07 `definitions`) references pointing at `components.schemas`. */
function relocated(schema: Json): Json {
  return JSON.parse(
    JSON.stringify(schema).replace(
      /"#\/(?:\$defs|definitions)\/([^"]+)"/g,
      (_match, id: string) => `"#/components/schemas/${id}"`,
    ),
  ) as Json;
}
