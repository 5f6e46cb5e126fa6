import { randomUUID } from 'node:crypto';
import {
  createServer,
  type IncomingMessage,
  type RequestListener,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import type { Registry } from 'prom-client';
import { baseError, errorEnvelope, isDomainError, type DomainError } from '@ofp/contracts';
import type { Logger } from './logger.js';
import { statusOf } from './http-errors.js';
import { createHttpMetrics } from './metrics.js';

/** Request bodies above this are refused with 413 (API.md §3). */
export const MAX_BODY_BYTES = 1024 * 1024;
/** Request lines up to 32 KiB are accepted so that an escaped `q` near its 8 KiB limit still reaches the validator (API.md §4). */
export const MAX_HEADER_BYTES = 64 * 1024;

const REQUEST_ID = /^[\x21-\x7e]{1,200}$/;

declare module 'express-serve-static-core' {
  interface Request {
    /** The request id, echoed from X-Request-Id when the client sent a usable one. */
    id: string;
    log: Logger;
  }
}

export interface HttpAppOptions {
  logger: Logger;
  metrics: Registry;
  /** Whether the process can take work (`/readyz`). */
  ready: () => boolean;
  /** Routes mounted after the common middleware and before the 404 fallback. */
  routes: (app: Express) => void;
  /** Hot endpoints served ahead of express (see {@link FastRoutes}). */
  fastRoutes?: FastRoutes;
}

/** What a handler served ahead of express gets besides the request and response. */
export interface FastRequest {
  readonly id: string;
  readonly log: Logger;
}

/** A request taken ahead of express: its route pattern (for the metrics) and its handler. */
export interface FastRoute {
  readonly route: string;
  readonly handle: (req: IncomingMessage, res: ServerResponse, request: FastRequest) => Promise<void>;
}

/**
 * Picks, synchronously, the requests served without express, whose per-request work (routers,
 * middleware, `res.send`) costs more than a cheap database read on a busy machine; `undefined` leaves
 * the request to express. Such a handler gets the same request id, metrics and error envelopes.
 */
export type FastRoutes = (req: IncomingMessage) => FastRoute | undefined;

/**
 * An express 5 app with request ids, JSON body parsing with the 1 MiB limit, health and metrics
 * endpoints, and the envelope error handling of API.md §2-3: unknown routes are a 404 envelope,
 * malformed JSON a 400, domain errors their mapped status, anything else a 500 without a stack trace.
 * `fastRoutes` are given each request first.
 */
export function createHttpApp(options: HttpAppOptions): RequestListener {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('query parser', 'simple');
  const duration = createHttpMetrics(options.metrics);

  /** Gives a request its id (echoed in `X-Request-Id`) and times it by method, route and status. */
  const track = (req: IncomingMessage, res: ServerResponse, route: () => string): string => {
    const id = requestIdOf(req);
    res.setHeader('X-Request-Id', id);
    const end = duration.startTimer({ method: req.method ?? 'GET' });
    res.on('finish', () => end({ route: route(), status: String(res.statusCode) }));
    return id;
  };

  app.use((req, res, next) => {
    req.id = track(req, res, () => {
      const route = (req.route as { path?: string } | undefined)?.path;
      return route === undefined ? 'unmatched' : `${req.baseUrl}${route}`;
    });
    req.log = options.logger.child({ request_id: req.id });
    next();
  });

  app.get('/livez', (_req, res) => {
    res.json({ status: 'ok' });
  });
  app.get('/readyz', (_req, res) => {
    const ready = options.ready();
    res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : 'not ready' });
  });
  app.get('/metrics', async (_req, res) => {
    res.setHeader('Content-Type', options.metrics.contentType);
    res.send(await options.metrics.metrics());
  });

  app.use(express.json({ limit: MAX_BODY_BYTES, type: jsonContentType, strict: true }));
  options.routes(app);

  app.use((req, _res, next) => {
    next(baseError('NotFound', `No route for ${req.method} ${req.path}`));
  });
  app.use(errorHandler);

  const fastRoutes = options.fastRoutes;
  if (!fastRoutes) return app;
  return (req, res) => {
    const fast = fastRoutes(req);
    if (!fast) {
      app(req, res);
      return;
    }
    const id = track(req, res, () => fast.route);
    // Made when first used: these handlers log only what goes wrong.
    let child: Logger | undefined;
    const request: FastRequest = {
      id,
      get log() {
        return (child ??= options.logger.child({ request_id: id }));
      },
    };
    fast.handle(req, res, request).catch((error: unknown) => {
      writeError(error, res, request);
    });
  };
}

/** The request id: the client's `X-Request-Id` when usable, else a new one. */
function requestIdOf(req: IncomingMessage): string {
  const given = req.headers['x-request-id'];
  return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
}

/** A JSON response in one write. */
export function writeJson(
  res: ServerResponse,
  status: number,
  body: string,
  headers: Readonly<Record<string, string>> = {},
): void {
  const bytes = Buffer.from(body);
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.setHeader('Content-Type', 'application/json; charset=utf-8');
  res.setHeader('Content-Length', bytes.length);
  res.statusCode = status;
  res.end(bytes);
}

function jsonContentType(req: { headers: Record<string, string | string[] | undefined> }): boolean {
  const type = req.headers['content-type'];
  return typeof type === 'string' && /^application\/(?:[\w.+-]+\+)?json\b/i.test(type.trim());
}

/** Errors thrown by body-parser carry a `type` and a status; map them to the contract's messages. */
function fromParserError(error: unknown): DomainError | undefined {
  if (typeof error !== 'object' || error === null || !('type' in error)) return undefined;
  switch (error.type) {
    case 'entity.parse.failed':
      return baseError('Invalid', 'Malformed JSON in request body');
    case 'entity.too.large':
      return baseError('PayloadTooLarge', `Request body exceeds ${MAX_BODY_BYTES} bytes`);
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return baseError('UnsupportedMediaType', 'Request body must be UTF-8 JSON');
    case 'request.aborted':
      return baseError('Invalid', 'Request aborted');
    default:
      return undefined;
  }
}

/**
 * Whether an error means the database (or another dependency) cannot be reached right now, which is
 * a 503 (API.md §3), not a 500: refused or broken connections, Postgres shutting down or out of
 * connections (SQLSTATE classes 08 and 57P, 53300), a pool that found no connection in time.
 */
function isDependencyDown(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  if (
    typeof code === 'string' &&
    (/^(08|57P)/.test(code) || ['53300', 'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE'].includes(code))
  ) {
    return true;
  }
  const message = (error as { message?: unknown }).message;
  return (
    typeof message === 'string' &&
    /timeout exceeded when trying to connect|Connection terminated/.test(message)
  );
}

function errorHandler(error: unknown, req: Request, res: Response, _next: NextFunction): void {
  writeError(error, res, req);
}

/**
 * The envelope of an error (API.md §2-3), logged unless it is the client's; a response already under
 * way is cut off instead.
 */
function writeError(error: unknown, res: ServerResponse, request: FastRequest): void {
  if (res.headersSent) {
    request.log.error({ err: error }, 'error after response started');
    res.destroy();
    return;
  }
  const domain = isDomainError(error) ? error : fromParserError(error);
  if (domain) {
    writeJson(res, statusOf(domain.kind), JSON.stringify(errorEnvelope(domain.errors)), domain.headers);
    return;
  }
  if (isDependencyDown(error)) {
    request.log.warn({ err: error }, 'a dependency is unavailable');
    writeJson(
      res,
      503,
      JSON.stringify(errorEnvelope({ base: [`Service temporarily unavailable (request ${request.id})`] })),
      { 'Retry-After': '1' },
    );
    return;
  }
  request.log.error({ err: error }, 'unhandled error');
  writeJson(res, 500, JSON.stringify(errorEnvelope({ base: [`Internal error (request ${request.id})`] })));
}

/** Listens on `port` (0 picks a free one) and resolves with the bound port. */
export async function listen(
  app: RequestListener,
  port: number,
  host?: string,
): Promise<{ server: Server; port: number }> {
  const server = createServer({ maxHeaderSize: MAX_HEADER_BYTES }, app);
  server.keepAliveTimeout = 65_000;
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
