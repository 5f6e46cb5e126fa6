import type { IncomingHttpHeaders } from 'node:http';
import type { z } from 'zod';
import type { IdempotencyStore, IdempotentWrite } from './idempotency.js';
import type { ErrorAnswer, Reply } from './reply.js';
import type { Logger } from '@ofp/runtime';

/**
 * An operation as data: everything routing, the pipeline's checks and the published description
 * need, and nothing that runs. A service declares its operations as specs, which alone describe it
 * (OpenAPI, the reference); where it runs, each spec is bound by its `operationId` to the
 * {@link Operation} that serves it ({@link bindRoutes}), making the {@link Route}s of the table.
 */
export interface RouteSpec {
  readonly method: HttpMethod;
  /**
   * The path as an OpenAPI template (`/v2/people/{id}`). Paths under `/v2` are also served under
   * `/api/v2` (API.md §1).
   */
  readonly path: string;
  /** A stable, unique name of the operation (`people.search`): OpenAPI's operationId, and its handler's key. */
  readonly operationId: string;
  readonly summary: string;
  /**
   * What the operation does for its caller, in the reference: what it answers, what it changes, the
   * headers that change its meaning, the scope it needs. Markdown.
   */
  readonly description: string;
  /** Groups operations in the reference (the model's name, `OAuth`, `Operations`). */
  readonly tag: string;
  /** The model the operation reads or writes, for metrics and the reference. */
  readonly model?: string;
  readonly access: AccessSpec;
  /** Query parameters the operation takes; any other is a 400 naming it (API.md §4). */
  readonly query?: QueryParameters;
  /**
   * Request headers the operation reads besides `Authorization`. Two of them the pipeline keeps for
   * the operation (API.md §5): `Idempotency-Key` (a write's replays, bound to its service's
   * {@link IdempotencyStore} by {@link bindRoutes}) and `Prefer` (`respond-async`, acknowledged with
   * `Preference-Applied`); the others are the operation's to read.
   */
  readonly headers?: readonly RequestHeader[];
  /**
   * The request body: `json` (parsed; another content type is a 415), `form` (the raw text of an
   * `application/x-www-form-urlencoded` body, for the handler to parse), or none (not read).
   */
  readonly body?: BodyKind;
  /** The JSON body's schema (the same one the handler validates with). */
  readonly request?: z.ZodType;
  /** Success responses by status: their schema, or a description of a body that is not JSON. */
  readonly responses: Readonly<Record<number, ResponseDescription>>;
  /** Error statuses the operation may answer besides the ones every route may (400, 401, 403, 429, 500, 503). */
  readonly errors?: readonly number[];
  /** `oauth`: its errors are RFC 6749 §5.2 errors (its {@link Operation} renders them), not the envelope. */
  readonly errorFormat?: 'oauth';
  /**
   * What to do instead of the methods its path refuses, which their 405 names (API.md §5: a model
   * whose records must not vanish refuses DELETE "and offers a state change instead").
   */
  readonly refused?: string;
}

/** Who may call an operation: `bearer` tokens holding one of `scopes` (the first is named when none is held). */
export interface AccessSpec {
  readonly kind: 'public' | 'bearer' | 'client' | 'admin';
  readonly scopes?: readonly string[];
}

/** What serves an operation, bound to its {@link RouteSpec} by `operationId`. */
export interface Operation<P = unknown> {
  handle(request: RouteRequest<P>): Promise<Reply>;
  /**
   * Renders every error of the operation (and the 405 of its path) in its own format (OAuth's RFC 6749
   * §5.2 errors) instead of the envelope (API.md §2-3); `answer` gives the status, messages and headers
   * the envelope would carry (a 413, a 503 with `Retry-After`, a 500 naming the request), logging it.
   */
  readonly renderError?: (error: unknown, answer: () => ErrorAnswer) => Reply;
}

/** A service's operations by `operationId`. */
export type Operations = Readonly<Record<string, Operation>>;

/**
 * A route of the table the pipeline (`createHttpApp`) runs: a spec, how its requests are admitted,
 * and its operation. Routing, 404 and 405 (`Allow`), the query-parameter check, body reading and the
 * scope check all come from the spec.
 */
export interface Route<P = unknown> extends Omit<RouteSpec, 'access'>, Operation<P> {
  readonly access: Access<P>;
  /**
   * Where the pipeline keeps the `Idempotency-Key`s of a write that declares the header: it replays a
   * key's first response, or runs the operation with {@link RouteRequest.idempotency}, through which
   * the operation records its response in the write's own transaction.
   */
  readonly idempotency?: IdempotencyStore;
}

/**
 * The routes of `specs`, each bound to the operation of its `operationId` and admitted as `admit`
 * says for its access; a write that declares `Idempotency-Key` keeps its keys in `idempotency`, the
 * service's store. A spec without an operation, an operation without a spec, an OAuth-format spec
 * whose operation renders no errors, or an idempotent write without a store is a programming error
 * found at composition.
 */
export function bindRoutes(
  specs: readonly RouteSpec[],
  operations: Operations,
  admit: (access: AccessSpec, spec: RouteSpec) => Access,
  idempotency?: IdempotencyStore,
): Route[] {
  const unused = new Set(Object.keys(operations));
  const routes = specs.map((spec): Route => {
    const operation = operations[spec.operationId];
    if (!operation) throw new Error(`no operation serves ${spec.operationId} (${spec.method} ${spec.path})`);
    if ((spec.errorFormat === 'oauth') !== (operation.renderError !== undefined))
      throw new Error(`${spec.operationId}: its errorFormat and its operation's renderError disagree`);
    unused.delete(spec.operationId);
    if (!spec.headers?.includes('Idempotency-Key'))
      return { ...spec, ...operation, access: admit(spec.access, spec) };
    if (!idempotency) throw new Error(`${spec.operationId}: takes Idempotency-Key, and no store keeps them`);
    return { ...spec, ...operation, access: admit(spec.access, spec), idempotency };
  });
  if (unused.size > 0) throw new Error(`operations without a spec: ${[...unused].join(', ')}`);
  return routes;
}

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export type BodyKind = 'json' | 'form';

/**
 * `names`: the parameters accepted, each described in `schemas`; `any`: the operation reads its query
 * from `url` itself (OAuth authorize).
 */
export type QueryParameters =
  | {
      readonly names: readonly string[];
      readonly schemas?: Readonly<Record<string, QueryParameter>>;
    }
  | 'any';

/** A query parameter as the reference describes it. */
export interface QueryParameter {
  readonly description: string;
  /** The value's schema (the parsed JSON's, for a `json` parameter). */
  readonly schema: z.ZodType;
  /** The value is a URI-escaped JSON document (`q`), rather than a plain string. */
  readonly json?: boolean;
  /** Named examples of the value (the JSON document itself, for a `json` parameter). */
  readonly examples?: Readonly<Record<string, { readonly summary: string; readonly value: unknown }>>;
}

export type RequestHeader = 'Idempotency-Key' | 'If-Match' | 'If-None-Match' | 'Prefer' | 'X-Request-Id';

export interface ResponseDescription {
  readonly description: string;
  /** The JSON body's schema; absent for a response without a JSON body. */
  readonly schema?: z.ZodType;
  /** Its media type when not JSON (`text/plain` for metrics). */
  readonly mediaType?: string;
  readonly headers?: readonly string[];
  /**
   * For a 201 of an operation that is not a create on its own collection (`POST /v2/webhooks/{id}/test`
   * makes a delivery): the collection path of the record it makes (`/v2/webhook_deliveries`), which its
   * `Location` names. The document links the answer to the operations on that record.
   */
  readonly creates?: string;
}

/**
 * Who may call an operation, and how a request proves it. `authenticate` runs first, before the query
 * parameters and the body are checked (of `client` access alone, whose credentials may be in the
 * form body, after the body is read), and either admits the request or throws the 401/429/503 to answer.
 */
export interface Access<P = unknown> extends AccessSpec {
  authenticate(request: IncomingRequest): Promise<Admission<P>>;
}

/** An admitted request: its principal, and headers every response to it carries (RateLimit-*). */
export interface Admission<P> {
  readonly principal: P;
  readonly scopes: readonly string[];
  readonly headers?: Readonly<Record<string, string>>;
  /** What the access log names: the organization and the client. */
  readonly organization?: number;
  readonly client?: string;
}

/** A request as the access step sees it. */
export interface IncomingRequest {
  readonly id: string;
  readonly method: HttpMethod | 'HEAD';
  /** The request target as sent (path and query). */
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  /**
   * The address of the client that sent the request: the connection's peer, or behind trusted proxies
   * (`trustedProxyHops`) the address the nearest of them saw, from `X-Forwarded-For`. IPv4-mapped IPv6
   * addresses are given as IPv4. Undefined once the connection is gone.
   */
  readonly remoteAddress: string | undefined;
  /**
   * The body as the route's {@link BodyKind} read it; still undefined when a route other than `client`
   * access authenticates (its body is read once it is admitted).
   */
  readonly body: unknown;
}

/** A routed, admitted request as its handler sees it. */
export interface RouteRequest<P = unknown> extends IncomingRequest {
  readonly log: Logger;
  /** `''`, or `/api` when the request came through the `/api/v2` alias. */
  readonly prefix: string;
  /** Path parameters, decoded. */
  readonly params: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, string | undefined>>;
  readonly principal: P;
  header(name: string): string | undefined;
  /**
   * The trace the request belongs to, as a W3C `traceparent`: the server span's when OpenTelemetry
   * traces this process, else the client's valid `traceparent` header, else undefined. A change the
   * request makes carries it to its events and webhooks (API.md §8, §9).
   */
  traceparent(): string | undefined;
  /**
   * The client sent `Prefer: respond-async` (RFC 7240) to an operation that declares `Prefer`: answer
   * once the change is durably recorded, without waiting for the read model (API.md §5).
   */
  readonly respondAsync: boolean;
  /**
   * A write with an `Idempotency-Key` (its operation declares the header): the operation records its
   * response with {@link IdempotentWrite.record}, in the write's own transaction. Undefined otherwise.
   */
  readonly idempotency: IdempotentWrite | undefined;
}

/** Anyone may call: health, metadata, the API descriptions. */
export const PUBLIC: Access<undefined> = {
  kind: 'public',
  authenticate: () => Promise.resolve({ principal: undefined, scopes: [] }),
};
