import { isUtf8 } from 'node:buffer';
import { randomUUID } from 'node:crypto';
import {
  createServer,
  STATUS_CODES,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import FindMyWay from 'find-my-way';
import getRawBody from 'raw-body';
import type { Registry } from 'prom-client';
import {
  baseError,
  errorEnvelope,
  fieldError,
  isDomainError,
  missingScope,
  type DomainError,
} from '@ofp/contracts';
import {
  createHttpMetrics,
  currentTraceparent,
  isDependencyDown,
  nameServerSpan,
  validTraceparent,
  withDatabaseDeadline,
  type Logger,
} from '@ofp/runtime';
import { refusedValueError, statusOf } from './http-errors.js';
import {
  idempotentReply,
  parseIdempotencyKey,
  requestHash,
  type IdempotencyStore,
  type IdempotentWrite,
} from './idempotency.js';
import { prefersAsync } from './record-http.js';
import { jsonReply, type ErrorAnswer, type Reply } from './reply.js';
import {
  PUBLIC,
  type Admission,
  type BodyKind,
  type HttpMethod,
  type Route,
  type RouteRequest,
} from './routes.js';

/** Request bodies above this are refused with 413 (API.md §3). */
export const MAX_BODY_BYTES = 1024 * 1024;
/** Form bodies (OAuth requests, a few parameters) above this are refused. */
const MAX_FORM_BYTES = 64 * 1024;
/** Request lines up to 32 KiB are accepted so that an escaped `q` near its 8 KiB limit still reaches the validator (API.md §4). */
export const MAX_HEADER_BYTES = 64 * 1024;

const REQUEST_ID = /^[\x21-\x7e]{1,200}$/;
const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json\s*(?:;|$)/i;
const CHARSET = /;\s*charset\s*=\s*"?([\w-]+)"?/i;
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';
const METHODS: readonly HttpMethod[] = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

export interface HttpAppOptions {
  logger: Logger;
  metrics: Registry;
  /** Whether the process can take work (`/readyz`). */
  ready: () => boolean;
  /** The routes this process serves (the route table of its services). */
  routes: readonly Route[];
  /**
   * How many reverse proxies (an Ingress controller, a load balancer) stand in front of the process
   * and append the address they saw to `X-Forwarded-For` (default 0: the connection's peer is the
   * client). Entries further left than that were written by the client and are not believed.
   */
  trustedProxyHops?: number;
  /**
   * How long after its arrival a request's database statements must be answered (a 503 with
   * Retry-After otherwise, API.md §3); none when left out.
   */
  databaseDeadlineMs?: number;
}

/**
 * The one request pipeline of every process (compare a route table served by a radix router, as
 * Fastify does): request id, route (404, and 405 with `Allow`), query parameters, body, access (token,
 * rate limit, tenant), scope, handler, reply, and one place that turns errors into the envelope of
 * API.md §2-3 (a DomainError into its status, a lost dependency into a 503, anything else into a 500
 * without internals). Every request is timed by route template and logged in one access-log line.
 * `/livez`, `/readyz` and `/metrics` are routes of every process.
 */
export function createHttpApp(options: HttpAppOptions): RequestListener {
  const routes = [...healthRoutes(options), ...options.routes];
  const router = FindMyWay({ ignoreTrailingSlash: true, maxParamLength: 500 });
  for (const route of routes) {
    const path = route.path.replace(/\{(\w+)\}/g, ':$1');
    // HEAD is a GET without its body (RFC 9110 §9.3.2): node leaves the body out of HEAD responses.
    const methods = route.method === 'GET' ? (['GET', 'HEAD'] as const) : [route.method];
    for (const method of methods) {
      router.on(method, path, noop, route);
      if (route.path.startsWith('/v2/')) router.on(method, `/api${path}`, noop, route);
    }
  }
  const duration = httpMetricsOf(options.metrics);
  const pipeline: Pipeline = {
    router,
    duration,
    log: options.logger,
    logsRequests: options.logger.isLevelEnabled('info'),
    trustedProxyHops: options.trustedProxyHops ?? 0,
    databaseDeadlineMs: options.databaseDeadlineMs,
  };
  return (req, res) => {
    void new Exchange(pipeline, req, res).run();
  };
}

interface Pipeline {
  readonly router: Router;
  readonly duration: DurationObserver;
  readonly log: Logger;
  readonly logsRequests: boolean;
  readonly trustedProxyHops: number;
  readonly databaseDeadlineMs: number | undefined;
}

type Router = FindMyWay.Instance<FindMyWay.HTTPVersion.V1>;

/**
 * One request on its way through the pipeline, and the request its handler sees. A class rather
 * than closures and object literals per request: requests are the hot path.
 */
class Exchange implements RouteRequest {
  readonly id: string;
  readonly method: HttpMethod | 'HEAD';
  readonly url: string;
  readonly prefix: string;
  readonly headers: IncomingHttpHeaders;
  params: Readonly<Record<string, string>> = {};
  query: Readonly<Record<string, string | undefined>> = {};
  body: unknown = undefined;
  principal: unknown = undefined;
  idempotency: IdempotentWrite | undefined = undefined;
  respondAsync = false;
  private route: Route | undefined;
  /** How the route, or the routes of the path (for a 405), render errors, when not in the envelope. */
  private renderError: Route['renderError'];
  private admission: Admission<unknown> | undefined;
  /**
   * The response's headers as names and values in turn, written once with the status line
   * (`writeHead`): node then builds the header block from them directly, without a header map.
   */
  private readonly responseHeaders: string[];
  private child: Logger | undefined;
  private readonly started = performance.now();

  constructor(
    private readonly pipeline: Pipeline,
    private readonly req: IncomingMessage,
    private readonly res: ServerResponse,
  ) {
    this.id = requestIdOf(req);
    this.responseHeaders = ['X-Request-Id', this.id];
    this.method = (req.method ?? 'GET') as HttpMethod | 'HEAD';
    this.url = req.url ?? '/';
    this.prefix = this.url.startsWith('/api/') ? '/api' : '';
    this.headers = req.headers;
  }

  /** Made when first used: most requests log only their access line. */
  get log(): Logger {
    return (this.child ??= this.pipeline.log.child({ request_id: this.id }));
  }

  get remoteAddress(): string | undefined {
    return clientAddress(this.req, this.pipeline.trustedProxyHops);
  }

  traceparent(): string | undefined {
    return currentTraceparent() ?? validTraceparent(this.headers.traceparent);
  }

  header(name: string): string | undefined {
    const value = this.headers[name.toLowerCase()];
    return Array.isArray(value) ? value.join(', ') : value;
  }

  async run(): Promise<void> {
    try {
      const found = this.pipeline.router.find(this.method, this.url);
      const route = found?.store as Route | undefined;
      if (!found || !route) {
        const refusal = unrouted(this.pipeline.router, this.method, this.url);
        this.renderError = refusal.renderError;
        throw refusal.error;
      }
      this.route = route;
      this.renderError = route.renderError;
      nameServerSpan(this.method, `${this.prefix}${route.path}`, route.operationId);
      this.params = found.params as Record<string, string>;
      this.respondAsync = route.headers?.includes('Prefer') === true && prefersAsync(this.header('prefer'));
      // Who asks comes before what they ask (docs/api-notes.md, "Order of checks"): a request without
      // valid credentials is a 401 whatever its query and body, and one without the scope a 403, before
      // any 400, 413 or 415. OAuth clients alone send their credentials in the form body, read first.
      const credentialsInBody = route.access.kind === 'client';
      // A route without a body (searches, gets, deletes) is not awaited for one: a promise and a
      // microtask fewer on the read path.
      const bodyKind = route.body;
      if (credentialsInBody && bodyKind) this.body = await readBody(this.req, bodyKind);
      const admitting = Date.now();
      await this.deadlined(admitting, () => this.admit(route));
      const admissionMs = Date.now() - admitting;
      this.query = checkQuery(route, found.searchParams);
      if (!credentialsInBody && bodyKind) this.body = await readBody(this.req, bodyKind);
      this.finish(await this.deadlined(Date.now() - admissionMs, () => this.handle(route)));
    } catch (error) {
      this.fail(error);
    }
  }

  /**
   * Runs `work` under the database deadline (API.md §3: a 503 within 5 s even while the database
   * hangs) counted from `since`. The admission and the handler share one deadline, the time spent
   * reading the body between them left out (the handler's counts from the end of the body less the
   * admission's time), so that a slow upload does not eat the handler's time and a slow admission
   * does not give the handler a deadline of its own: two would answer a hanging database's 503 late.
   */
  private deadlined<T>(since: number, work: () => Promise<T>): Promise<T> {
    const deadlineMs = this.pipeline.databaseDeadlineMs;
    return deadlineMs === undefined ? work() : withDatabaseDeadline(since + deadlineMs, work);
  }

  /** The access step (401, 429, 503) and the scope check (403). */
  private async admit(route: Route): Promise<void> {
    const admission = await route.access.authenticate(this);
    this.admission = admission;
    this.principal = admission.principal;
    if (admission.headers)
      for (const name in admission.headers) this.responseHeaders.push(name, admission.headers[name]!);
    checkScope(route, admission.scopes);
  }

  private async handle(route: Route): Promise<Reply> {
    if (route.idempotency) return this.write(route, route.idempotency);
    return this.preferred(await route.handle(this));
  }

  /**
   * A write that declares `Idempotency-Key` (API.md §5): with a key, the key's first response, or the
   * operation's, which it records in its transaction ({@link idempotentReply}); the same request
   * through `/api/v2` or with a trailing slash is the same request.
   */
  private async write(route: Route, store: IdempotencyStore): Promise<Reply> {
    const key = parseIdempotencyKey(this.header('idempotency-key'));
    if (key === undefined) return this.preferred(await route.handle(this));
    const orgId = this.admission?.organization;
    if (orgId === undefined)
      throw new Error(
        `${route.operationId}: an Idempotency-Key is kept per organization, and the request has none`,
      );
    const path = (this.url.split('?')[0] ?? this.url).slice(this.prefix.length).replace(/\/+$/, '');
    const reply = await idempotentReply(
      store,
      orgId,
      key,
      requestHash(this.method, path, this.body),
      (write) => {
        this.idempotency = write;
        return route.handle(this);
      },
    );
    return this.preferred(reply);
  }

  /** `Prefer: respond-async` on an operation that declares `Prefer`, acknowledged (RFC 7240 §3). */
  private preferred(reply: Reply): Reply {
    if (!this.respondAsync) return reply;
    return { ...reply, headers: { ...reply.headers, 'Preference-Applied': 'respond-async' } };
  }

  private fail(error: unknown): void {
    if (this.res.headersSent) {
      this.log.error({ err: error }, 'error after response started');
      this.res.destroy();
      return;
    }
    this.finish(
      this.renderError
        ? this.renderError(error, () => errorAnswer(error, this.id, this.log))
        : errorReply(error, this.id, this.log),
    );
  }

  /** Writes the reply, times the request by route template, and logs its access line. */
  private finish(reply: Reply): void {
    write(this.res, reply, this.responseHeaders);
    const route = this.route === undefined ? 'unmatched' : `${this.prefix}${this.route.path}`;
    const ms = performance.now() - this.started;
    const status = this.res.statusCode;
    this.pipeline.duration(this.method, route, status).observe(ms / 1000);
    if (!this.pipeline.logsRequests) return;
    const admission = this.admission;
    this.pipeline.log.info(
      {
        request_id: this.id,
        method: this.method,
        route,
        status,
        ms: Math.round(ms * 10) / 10,
        ...(admission?.organization === undefined ? {} : { organization: admission.organization }),
        ...(admission?.client === undefined ? {} : { client: admission.client }),
      },
      'request',
    );
  }
}

function noop(): void {}

/**
 * The client's address: with `hops` trusted proxies in front, the `hops`-th entry of `X-Forwarded-For`
 * from the right (each proxy appends the peer it saw; the rightmost is the one nearest this process),
 * else the peer of the connection.
 */
function clientAddress(req: IncomingMessage, hops: number): string | undefined {
  let address = req.socket.remoteAddress;
  if (hops > 0) {
    const header = req.headers['x-forwarded-for'];
    const forwarded = (Array.isArray(header) ? header.join(',') : (header ?? ''))
      .split(',')
      .map((entry) => entry.trim())
      .filter((entry) => entry !== '');
    // Fewer entries than proxies: the request reached a proxy with none, so the leftmost is the client.
    address = forwarded[Math.max(0, forwarded.length - hops)] ?? address;
  }
  return address?.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

/**
 * 405 with `Allow` when the path is served for other methods, naming what to do instead when its
 * routes say (`refused`), else 404 (API.md §3); rendered as the path's routes render their errors.
 */
function unrouted(
  router: Router,
  method: string,
  url: string,
): { error: DomainError; renderError?: Route['renderError'] } {
  const served = METHODS.map((other) => ({
    other,
    route: router.find(other, url)?.store as Route | undefined,
  }));
  const allowed = served.filter(({ route }) => route !== undefined);
  const path = url.split('?')[0] ?? url;
  if (allowed.length === 0) return { error: baseError('NotFound', `No route for ${method} ${path}`) };
  const instead = allowed.find(({ route }) => route!.refused !== undefined)?.route!.refused;
  const error = baseError(
    'MethodNotAllowed',
    `${method} is not allowed here${instead ? `: ${instead}` : ''}`,
    { Allow: allowed.map(({ other }) => other).join(', ') },
  );
  const renderError = allowed.find(({ route }) => route!.renderError !== undefined)?.route!.renderError;
  return renderError ? { error, renderError } : { error };
}

/**
 * The query parameters an operation declares, each given once; any other is a 400 naming it, with
 * the hint that searches take their options in `q` (API.md §4).
 */
function checkQuery(
  route: Route,
  given: Readonly<Record<string, unknown>>,
): Record<string, string | undefined> {
  if (route.query === 'any') return {};
  const accepted = route.query?.names ?? [];
  const checked: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(given)) {
    if (!accepted.includes(name)) {
      throw fieldError(
        'Invalid',
        name,
        accepted.includes('q')
          ? `is not a query parameter: a search takes its options and filters in q, such as q={"${name}":…}`
          : `is not a query parameter of ${route.method} ${route.path}`,
      );
    }
    // fast-querystring, find-my-way's parser, gives a parameter given more than once as an array.
    if (typeof value !== 'string') throw baseError('Invalid', `${name} must be given once`);
    checked[name] = value;
  }
  return checked;
}

/** A token lacking every scope the operation accepts is a 403 naming the first. */
function checkScope(route: Route, held: readonly string[]): void {
  const scopes = route.access.scopes;
  if (!scopes || scopes.length === 0 || scopes.some((scope) => held.includes(scope))) return;
  throw missingScope(scopes[0]!);
}

/**
 * A `WWW-Authenticate: Bearer` challenge (RFC 6750 §3). Without an error code when the request carried
 * no token (§3.1: the client may not know it needs one); attribute values are quoted strings, and the
 * descriptions this platform produces stay inside the characters §3 allows.
 */
export function bearerChallenge(error?: { code: string; description?: string; scope?: string }): string {
  if (error === undefined) return 'Bearer';
  const attributes = [`error="${error.code}"`];
  if (error.description !== undefined) attributes.push(`error_description="${error.description}"`);
  if (error.scope !== undefined) attributes.push(`scope="${error.scope}"`);
  return `Bearer ${attributes.join(', ')}`;
}

/**
 * The body as the route reads it: JSON (API.md §1: any other content type is a 415, malformed JSON a
 * 400, more than 1 MiB a 413; an empty body is `{}`) or a form's text.
 */
async function readBody(req: IncomingMessage, kind: BodyKind): Promise<unknown> {
  const type = req.headers['content-type'] ?? '';
  if (kind === 'json' && !JSON_TYPE.test(type))
    throw baseError('UnsupportedMediaType', 'Request body must be application/json');
  const charset = CHARSET.exec(type)?.[1]?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8')
    throw baseError('UnsupportedMediaType', 'Request body must be UTF-8');
  const limit = kind === 'json' ? MAX_BODY_BYTES : MAX_FORM_BYTES;
  let bytes: Buffer;
  try {
    bytes = await getRawBody(req, { limit });
  } catch (error) {
    const problem = (error as { type?: string }).type;
    if (problem === 'entity.too.large') {
      // raw-body leaves the rest of the body unread and the request paused: a client still sending it
      // would wait for ever, and its connection with it. The rest is read and dropped, so the client
      // finishes sending and reads the 413.
      req.resume();
      throw baseError('PayloadTooLarge', `Request body exceeds ${limit} bytes`);
    }
    if (problem === 'request.aborted' || problem === 'request.size.invalid')
      throw baseError('Invalid', 'The request body was cut short');
    throw error;
  }
  // Decoding would replace what is not UTF-8 with U+FFFD, silently (API.md §1: a 400 instead).
  if (!isUtf8(bytes)) throw baseError('Invalid', notUtf8Message(bytes));
  const text = bytes.toString('utf8');
  if (kind === 'form') return text;
  // RFC 8259 §2: JSON text is one value; nothing (or only white space) is no JSON, so no empty object.
  if (text.trim() === '') throw baseError('Invalid', 'The request body is empty: send a JSON object');
  if (nestingDepth(text) > MAX_BODY_DEPTH)
    throw baseError('Invalid', `Request body nests arrays and objects more than ${MAX_BODY_DEPTH} deep`);
  let body: unknown;
  try {
    body = JSON.parse(text) as unknown;
  } catch {
    throw baseError('Invalid', 'Malformed JSON in request body');
  }
  // An escaped surrogate (`"\ud800"`) is valid JSON text, but a lone one is no character: no UTF-8
  // holds it, and Postgres refuses it. Only a body that escapes surrogates needs looking through.
  const lone = SURROGATE_ESCAPE.test(text) ? loneSurrogateAt(body, '') : undefined;
  if (lone !== undefined)
    throw baseError(
      'Invalid',
      `Request body text must be UTF-8: ${lone.where === '' ? 'the body' : lone.where} holds a lone surrogate (\\u${lone.unit}), which is no character`,
    );
  return body;
}

/**
 * How deep a JSON body may nest arrays and objects. Records nest four levels at most (a shipment's
 * packages' lines); anything deeper is junk, refused before it is parsed and walked.
 */
export const MAX_BODY_DEPTH = 32;

/** The deepest nesting of arrays and objects in JSON text (brackets inside strings aside), by one pass. */
function nestingDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) deepest = Math.max(deepest, ++depth);
    else if (c === 0x5d || c === 0x7d) depth--;
  }
  return deepest;
}

const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/** The first string (or key) of a parsed body holding a lone surrogate: its column path and the code unit. */
function loneSurrogateAt(value: unknown, path: string): { where: string; unit: string } | undefined {
  if (typeof value === 'string') {
    if (value.isWellFormed()) return undefined;
    const unit = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.exec(value)![0];
    return { where: path, unit: unit.charCodeAt(0).toString(16) };
  }
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      const found = loneSurrogateAt(value[index], `${path}[${index}]`);
      if (found) return found;
    }
  } else if (typeof value === 'object' && value !== null) {
    for (const [key, nested] of Object.entries(value)) {
      const where = path === '' ? key : `${path}.${key}`;
      const found = key.isWellFormed()
        ? loneSurrogateAt(nested, where)
        : loneSurrogateAt(key, `a key of ${path || 'the body'}`);
      if (found) return found;
    }
  }
  return undefined;
}

/** Where a body that is not UTF-8 first goes wrong (the Unicode Standard's table 3-7 of well-formed byte sequences). */
function notUtf8Message(bytes: Buffer): string {
  let at = 0;
  while (at < bytes.length) {
    const lead = bytes[at]!;
    const length =
      lead < 0x80 ? 1 : lead < 0xc2 ? 0 : lead < 0xe0 ? 2 : lead < 0xf0 ? 3 : lead < 0xf5 ? 4 : 0;
    // The second byte's range narrows after E0, ED, F0 and F4 (no overlong forms, surrogates, or beyond U+10FFFF).
    const low = lead === 0xe0 ? 0xa0 : lead === 0xf0 ? 0x90 : 0x80;
    const high = lead === 0xed ? 0x9f : lead === 0xf4 ? 0x8f : 0xbf;
    let valid = length > 0;
    for (let next = 1; valid && next < length; next++) {
      const byte = bytes[at + next];
      valid = byte !== undefined && byte >= (next === 1 ? low : 0x80) && byte <= (next === 1 ? high : 0xbf);
    }
    if (!valid) break;
    at += length;
  }
  const byte = bytes[at]?.toString(16).toUpperCase().padStart(2, '0') ?? 'end';
  return `Request body must be UTF-8: the byte 0x${byte} at offset ${at} does not start a valid UTF-8 character`;
}

/** The request id: the client's `X-Request-Id` when usable, else a new one. */
function requestIdOf(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

/**
 * Writes a reply: its status and `headers` (the pipeline's, then the reply's) at once, then its body as
 * the string it is (node writes it with the header block, no copy into a Buffer of our own); JSON
 * unless the reply names another content type.
 */
function write(res: ServerResponse, reply: Reply, headers: string[]): void {
  let typed = false;
  for (const name in reply.headers) {
    headers.push(name, reply.headers[name]!);
    typed ||= name.toLowerCase() === 'content-type';
  }
  if (reply.body === undefined) {
    // 204 and 304 have no body by definition; any other status says that it has none.
    if (reply.status !== 204 && reply.status !== 304) headers.push('Content-Length', '0');
    res.writeHead(reply.status, headers);
    res.end();
    return;
  }
  if (!typed) headers.push('Content-Type', JSON_CONTENT_TYPE);
  headers.push('Content-Length', String(Buffer.byteLength(reply.body)));
  res.writeHead(reply.status, headers);
  res.end(reply.body);
}

/** An error's status, messages and headers (API.md §3), logged unless it is the client's. */
export function errorAnswer(error: unknown, requestId: string, log: Logger): ErrorAnswer {
  if (isDomainError(error)) {
    return { status: statusOf(error.kind), errors: error.errors, headers: headersOf(error) };
  }
  const refused = refusedValueError(error);
  if (refused) {
    log.warn({ err: error }, 'Postgres refused a value of the request: its validation let it through');
    return { status: statusOf(refused.kind), errors: refused.errors };
  }
  if (isDependencyDown(error)) {
    log.warn({ err: error }, 'a dependency is unavailable');
    return {
      status: 503,
      errors: { base: [`Service temporarily unavailable (request ${requestId})`] },
      headers: { 'Retry-After': '1' },
    };
  }
  log.error({ err: error }, 'unhandled error');
  return { status: 500, errors: { base: [`Internal error (request ${requestId})`] } };
}

/** The envelope of an error (API.md §2-3), logged unless it is the client's. */
export function errorReply(error: unknown, requestId: string, log: Logger): Reply {
  const { status, errors, headers } = errorAnswer(error, requestId, log);
  return jsonReply(status, errorEnvelope(errors), headers);
}

/** An error's headers, with the RFC 6750 §3.1 challenge of a token that lacks a scope. */
function headersOf(error: DomainError): Readonly<Record<string, string>> {
  const scope = error.requiredScope;
  if (scope === undefined) return error.headers;
  const challenge = bearerChallenge({
    code: 'insufficient_scope',
    description: `The access token lacks the ${scope} scope`,
    scope,
  });
  return { ...error.headers, 'WWW-Authenticate': challenge };
}

/** `/livez` (always 200), `/readyz` (503 until started and again while draining) and `/metrics`. */
function healthRoutes(options: HttpAppOptions): Route[] {
  return [
    {
      method: 'GET',
      path: '/livez',
      operationId: 'livez',
      summary: 'Liveness: the process is running',
      description:
        'Answers 200 while the process runs, whatever its dependencies: a failing liveness probe restarts the process, which a database outage does not call for.',
      tag: 'Operations',
      access: PUBLIC,
      responses: { 200: { description: 'Alive' } },
      handle: () => Promise.resolve(jsonReply(200, { status: 'ok' })),
    },
    {
      method: 'GET',
      path: '/readyz',
      operationId: 'readyz',
      summary: 'Readiness: the process takes work',
      description:
        'Answers 200 once the process has started and its dependencies answer, 503 with `Retry-After` before that and again while it drains on shutdown: load balancers send requests only to a ready process.',
      tag: 'Operations',
      access: PUBLIC,
      responses: { 200: { description: 'Ready' } },
      errors: [503],
      handle: () => {
        // API.md §3: a 503 (not ready: starting, draining) comes with Retry-After.
        const reply = options.ready()
          ? jsonReply(200, { status: 'ready' })
          : jsonReply(503, { status: 'not ready' }, { 'Retry-After': '1' });
        return Promise.resolve(reply);
      },
    },
    {
      method: 'GET',
      path: '/metrics',
      operationId: 'metrics',
      summary: 'Prometheus metrics of the process',
      description:
        "The process's metrics in Prometheus' text format: requests, latencies, consumers, webhook deliveries, pools (docs/operations.md).",
      tag: 'Operations',
      access: PUBLIC,
      responses: { 200: { description: 'Prometheus text format', mediaType: 'text/plain' } },
      handle: async () => ({
        status: 200,
        headers: { 'Content-Type': options.metrics.contentType },
        body: await options.metrics.metrics(),
      }),
    },
  ];
}

/** Observes one request's duration in seconds. */
type DurationObserver = (method: string, route: string, status: number) => { observe(seconds: number): void };

const httpMetrics = new WeakMap<Registry, DurationObserver>();

/**
 * The request-duration histogram of a registry, one however many listeners (a public and an admin
 * port) record into it. Each series' child is looked up once (prom-client hashes the labels of every
 * `observe` otherwise): by route template, method and status.
 */
function httpMetricsOf(registry: Registry): DurationObserver {
  let observer = httpMetrics.get(registry);
  if (!observer) {
    const histogram = createHttpMetrics(registry);
    type Child = { observe(seconds: number): void };
    const children = new Map<string, Map<number, Child>>();
    observer = (method, route, status) => {
      const key = `${method} ${route}`;
      let byStatus = children.get(key);
      if (!byStatus) children.set(key, (byStatus = new Map<number, Child>()));
      let child = byStatus.get(status);
      if (!child) byStatus.set(status, (child = histogram.labels({ method, route, status: String(status) })));
      return child;
    };
    httpMetrics.set(registry, observer);
  }
  return observer;
}

/** How long a client may take to send a request, and how often Node checks (its `connectionsCheckingInterval`). */
export interface RequestTimeouts {
  readonly headersMs: number;
  readonly requestMs: number;
  readonly checkEveryMs: number;
}

/**
 * How long a client may take to send a request's line and headers, and its whole request (a body
 * that stops mid-way, a slow or wrong Content-Length): Node's defaults (60 s and 5 minutes) held a
 * connection that long. 1 MiB in 30 s is 35 KB/s. Node checks them every second (its default, 30 s,
 * let a connection stay up to twice its timeout); a check walks only the connections whose request is
 * still coming in.
 */
const REQUEST_TIMEOUTS: RequestTimeouts = { headersMs: 20_000, requestMs: 30_000, checkEveryMs: 1_000 };

/**
 * Answers a request Node's parser refused, in the envelope (API.md §2), then closes the connection:
 * Node's default answers a bare 400, 408 or 431, and a listener (this one, before) that destroys the
 * socket left a broken client (an invalid Content-Length, both Content-Length and Transfer-Encoding,
 * a bad chunk, an unknown method, a header over the limit, a body that never ends) with a reset
 * connection and no word of why. The answer carries an `X-Request-Id` as every response does (API.md
 * §3): the request's own when its headers were read and named one, else a new one. A connection whose
 * client is gone is closed as it is, and so is one whose response to an earlier, complete request is
 * under way (pipelined requests: an answer now would be taken for that request's). The socket's current
 * response is Node's `_httpMessage`, which its own default listener reads for the same purpose.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Duplex, timeouts: RequestTimeouts): void {
  // Node sets it to null once the connection's response is written, undefined before any.
  const pending = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage ?? undefined;
  const answer = clientErrorAnswer(error, timeouts);
  const earlier = pending !== undefined && (pending.headersSent || pending.req.complete);
  if (answer === undefined || !socket.writable || earlier) {
    socket.destroy();
    return;
  }
  const body = JSON.stringify(errorEnvelope({ base: [answer.message] }));
  const id = pending === undefined ? randomUUID() : requestIdOf(pending.req);
  socket.end(
    `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status]}\r\nX-Request-Id: ${id}\r\nContent-Type: ${JSON_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** The status and message a refused request is answered with; undefined when nobody is left to tell. */
function clientErrorAnswer(
  error: NodeJS.ErrnoException,
  timeouts: RequestTimeouts,
): { status: number; message: string } | undefined {
  if (error.code === 'HPE_HEADER_OVERFLOW')
    return { status: 431, message: `The request line and headers exceed ${MAX_HEADER_BYTES / 1024} KiB` };
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT')
    return {
      status: 408,
      message: `The request was not received in full within ${timeouts.requestMs / 1000} s (its headers within ${timeouts.headersMs / 1000} s)`,
    };
  if (error.code?.startsWith('HPE_')) {
    const reason = (error as { reason?: unknown }).reason;
    return {
      status: 400,
      message: `Malformed HTTP request: ${typeof reason === 'string' ? reason : error.code}`,
    };
  }
  return undefined;
}

/**
 * Listens on `port` (0 picks a free one) and resolves with the bound port. `timeouts` are the
 * production ones unless a test shortens them to see a 408 in less than a minute.
 */
export async function listen(
  app: RequestListener,
  port: number,
  host?: string,
  timeouts = REQUEST_TIMEOUTS,
): Promise<{ server: Server; port: number }> {
  const server = createServer(
    { maxHeaderSize: MAX_HEADER_BYTES, connectionsCheckingInterval: timeouts.checkEveryMs },
    app,
  );
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = timeouts.headersMs;
  server.requestTimeout = timeouts.requestMs;
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) =>
    answerClientError(error, socket, timeouts),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return { server, port: (server.address() as AddressInfo).port };
}

/** Stops accepting connections, lets in-flight requests finish, then closes idle keep-alive sockets. */
export async function closeServer(server: Server): Promise<void> {
  const closed = new Promise<void>((resolve, reject) =>
    server.close((error) => (error ? reject(error) : resolve())),
  );
  server.closeIdleConnections();
  const forced = setTimeout(() => server.closeAllConnections(), 10_000);
  try {
    await closed;
  } finally {
    clearTimeout(forced);
  }
}
