import createClient from 'openapi-fetch';
import { PlatformError } from './errors.js';
import type { Events, Models } from './models.js';
import type { paths } from './openapi.js';
import { tokenSource, type Credentials } from './tokens.js';
import { platformFetch, type RetryOptions } from './transport.js';
import { verifyWebhook, type IncomingHeaders, type WebhookEvent } from './webhooks.js';

/** A model the API serves, by its name in paths: `people`, `orders`, `webhooks`... */
export type ModelName = keyof Models;
/** A model's record as reads answer it. */
export type RecordOf<M extends ModelName> = Models[M]['record'];
/** A model's search: filters (typed by column and operator), order and page (API.md §4). */
export type QueryOf<M extends ModelName> = Models[M]['query'];
/** The models that take a create, an update, a delete. */
export type CreatableModel = {
  [M in ModelName]: [Models[M]['create']] extends [never] ? never : M;
}[ModelName];
export type UpdatableModel = {
  [M in ModelName]: [Models[M]['update']] extends [never] ? never : M;
}[ModelName];
export type DeletableModel = { [M in ModelName]: Models[M]['deletable'] extends true ? M : never }[ModelName];
/** An event type (`order.cancelled`). */
export type EventType = keyof Events;

export interface OfpClientOptions {
  /** The platform's base URL (`https://ofp.example.com`, `http://localhost:8080`). */
  readonly baseUrl: string;
  /** A token, client credentials, or a refresh token (API.md §7); none for the public endpoints only. */
  readonly credentials?: Credentials;
  /** Retries of 429, 502, 503, 504 and network errors (4 tries, `Retry-After` honoured up to 30 s). */
  readonly retry?: RetryOptions;
  /** The fetch that sends requests (the global one when left out). */
  readonly fetch?: (request: Request) => Promise<Response>;
}

/** A page of a search (API.md §2). */
export interface Page<R> {
  readonly results: R[];
  /** Every match, ignoring limit and offset. */
  readonly totalResults: number;
  readonly offset: number;
}

export interface WriteOptions {
  /**
   * The write's `Idempotency-Key` (API.md §5): the same key and body within 24 h answer the first
   * response again. Left out, the client makes one per call, the same on each of its retries.
   */
  readonly idempotencyKey?: string;
  /** `Prefer: respond-async`: answer once the change is durable, without waiting for reads to show it. */
  readonly respondAsync?: boolean;
}

export interface ChangeOptions extends WriteOptions {
  /** The version the change applies to (`If-Match: W/"<version>"`), else a 412. */
  readonly ifMatch?: number;
}

export interface EventsOptions {
  /** Only these event types. */
  readonly types?: readonly EventType[];
  /** Only events of this model's records; with `recordId`, of that record. */
  readonly model?: ModelName;
  readonly recordId?: number;
  /** A cursor saved from an earlier read (`EventStream.cursor`): go on right after it. */
  readonly startingAfter?: string;
  /** Events per request, 1 to 500 (default 100). */
  readonly pageSize?: number;
  /**
   * Keep polling once the feed has nothing more, every `pollIntervalMs` (5 s), until `signal`
   * aborts or the loop breaks; without it, the stream ends there.
   */
  readonly follow?: boolean;
  readonly pollIntervalMs?: number;
  readonly signal?: AbortSignal;
}

/**
 * The events feed as an async iterator (docs/events-feed.md). `cursor` is where a later read resumes
 * so that nothing is missed: it moves past a page once its last event was taken, so saving it after
 * handling an event and resuming from it may hand the rest of that page's earlier events again
 * (at least once, as webhooks are): deduplicate on `id`.
 */
export interface EventStream extends AsyncIterable<WebhookEvent> {
  readonly cursor: string | undefined;
}

interface Envelope<R> {
  readonly count: number;
  readonly total_results?: number;
  readonly offset?: number;
  readonly results: R;
}

/** A page size for reading everything: the largest `limit` (API.md §4). */
const LIST_PAGE = 500;
const MAX_FILTERS = 20;

/**
 * The platform's API for integrators: typed searches, reads and writes of every model, all pages of a
 * search as one async iterator, the events feed, and webhook verification, with tokens, retries and
 * idempotency keys handled. Every other operation (webhook management, deliveries) is on `api`, the
 * typed openapi-fetch client of the whole document, through the same tokens and retries.
 *
 * ```ts
 * const ofp = new OfpClient({ baseUrl, credentials: { clientId, clientSecret } });
 * const person = await ofp.create('people', { last_name: 'Lovelace' });
 * for await (const order of ofp.list('orders', { filters: [{ operand: 'status', operator: '=', value: 'open' }] })) { ... }
 * ```
 */
export class OfpClient {
  /** The typed client of every operation (openapi-fetch), through this client's tokens and retries. */
  readonly api: ReturnType<typeof createClient<paths>>;
  private readonly baseUrl: string;
  private readonly send: (request: Request) => Promise<Response>;

  constructor(options: OfpClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    const raw = options.fetch ?? ((request: Request) => fetch(request));
    this.send = platformFetch({
      ...(options.credentials === undefined
        ? {}
        : { tokens: tokenSource(this.baseUrl, options.credentials, raw) }),
      ...(options.retry === undefined ? {} : { retry: options.retry }),
      fetch: raw,
    });
    this.api = createClient<paths>({ baseUrl: this.baseUrl, fetch: this.send });
  }

  /** One record by id; a `PlatformError` with status 404 when there is none. */
  async get<M extends ModelName>(model: M, id: number): Promise<RecordOf<M>> {
    return (await this.call<Envelope<RecordOf<M>>>('GET', `/v2/${model}/${id}`)).results;
  }

  /** One page of a search: `q` is checked against the model's columns, operators and value types. */
  async search<M extends ModelName>(model: M, q: QueryOf<M> = {}): Promise<Page<RecordOf<M>>> {
    const query = Object.keys(q).length === 0 ? '' : `?q=${encodeURIComponent(JSON.stringify(q))}`;
    const page = await this.call<Envelope<RecordOf<M>[]>>('GET', `/v2/${model}${query}`);
    return { results: page.results, totalResults: page.total_results ?? 0, offset: page.offset ?? 0 };
  }

  /** Every record a search matches, page after page (see {@link OfpClient.pages}). */
  async *list<M extends ModelName>(model: M, q: QueryOf<M> = {}): AsyncGenerator<RecordOf<M>> {
    for await (const page of this.pages(model, q)) yield* page.results;
  }

  /**
   * Every page of a search, `q.limit` records each (500 when left out). Ordered by id (or not ordered),
   * pages follow each other by id (each asks for ids past the last one): every page costs the same
   * however deep, and a record created meanwhile is neither skipped nor read twice. In any other order
   * they follow by offset, which costs what it skips and may shift when records change meanwhile.
   */
  async *pages<M extends ModelName>(model: M, q: QueryOf<M> = {}): AsyncGenerator<Page<RecordOf<M>>> {
    const query = q as SearchShape;
    const size = query.limit ?? LIST_PAGE;
    const direction = keysetDirection(query);
    if (direction !== undefined) {
      let last: number | undefined;
      for (;;) {
        const after =
          last === undefined
            ? []
            : [{ operand: 'id', operator: direction === 'asc' ? '>' : '<', value: last }];
        const page = await this.search(model, {
          ...query,
          limit: size,
          order: [{ column: 'id', direction }],
          filters: [...(query.filters ?? []), ...after],
          ...(last === undefined ? {} : { offset: 0 }),
        } as QueryOf<M>);
        yield page;
        const end = page.results[page.results.length - 1] as { id: number } | undefined;
        if (page.results.length < size || end === undefined) return;
        last = end.id;
      }
    }
    for (let offset = query.offset ?? 0; ;) {
      const page = await this.search(model, { ...query, limit: size, offset } as QueryOf<M>);
      yield page;
      offset += page.results.length;
      if (page.results.length < size || offset >= page.totalResults) return;
    }
  }

  /** Creates a record (`POST /v2/<model>`); what the platform answers, with its id and version. */
  async create<M extends CreatableModel>(
    model: M,
    body: Models[M]['create'],
    options: WriteOptions = {},
  ): Promise<Models[M]['created']> {
    return (
      await this.call<Envelope<Models[M]['created']>>('POST', `/v2/${model}`, body, writeHeaders(options))
    ).results;
  }

  /** Changes the fields given (`PATCH`); with `ifMatch`, only if the record is still at that version. */
  async update<M extends UpdatableModel>(
    model: M,
    id: number,
    body: Models[M]['update'],
    options: ChangeOptions = {},
  ): Promise<RecordOf<M>> {
    return (
      await this.call<Envelope<RecordOf<M>>>('PATCH', `/v2/${model}/${id}`, body, writeHeaders(options))
    ).results;
  }

  /** Deletes a record; the deleted record. */
  async delete<M extends DeletableModel>(
    model: M,
    id: number,
    options: ChangeOptions = {},
  ): Promise<RecordOf<M>> {
    return (
      await this.call<Envelope<RecordOf<M>>>('DELETE', `/v2/${model}/${id}`, undefined, writeHeaders(options))
    ).results;
  }

  /**
   * The organization's events in order (`GET /v2/events`, docs/events-feed.md), as an async iterator
   * that resumes from a saved cursor:
   *
   * ```ts
   * const events = ofp.events({ startingAfter: await load(), follow: true });
   * for await (const event of events) { await handle(event); await save(events.cursor); }
   * ```
   */
  events(options: EventsOptions = {}): EventStream {
    const position = { cursor: options.startingAfter };
    return {
      get cursor() {
        return position.cursor;
      },
      [Symbol.asyncIterator]: () => this.readEvents(options, position),
    };
  }

  /** The feed from `position.cursor` on, moving it past each page once its last event was taken. */
  private async *readEvents(
    options: EventsOptions,
    position: { cursor: string | undefined },
  ): AsyncGenerator<WebhookEvent> {
    for (;;) {
      const query = new URLSearchParams({ limit: String(options.pageSize ?? 100) });
      if (position.cursor !== undefined) query.set('starting_after', position.cursor);
      if (options.types !== undefined) query.set('type', options.types.join(','));
      if (options.model !== undefined) query.set('model', options.model);
      if (options.recordId !== undefined) query.set('record_id', String(options.recordId));
      const page = await this.call<{ results: WebhookEvent[]; has_more: boolean; next_cursor: string }>(
        'GET',
        `/v2/events?${query.toString()}`,
        undefined,
        {},
        options.signal,
      );
      yield* page.results;
      position.cursor = page.next_cursor;
      if (page.has_more) continue;
      if (!options.follow) return;
      await abortableSleep(options.pollIntervalMs ?? 5_000, options.signal);
      if (options.signal?.aborted) return;
    }
  }

  /** Verifies a webhook delivery with the endpoint's secret (see {@link verifyWebhook}). */
  verifyWebhook(
    body: string | Buffer,
    headers: IncomingHeaders,
    secret: string | readonly string[],
  ): WebhookEvent {
    return verifyWebhook(body, headers, secret);
  }

  private async call<T>(
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
    signal?: AbortSignal,
  ): Promise<T> {
    const response = await this.send(
      new Request(`${this.baseUrl}${path}`, {
        method,
        headers: body === undefined ? headers : { ...headers, 'Content-Type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        ...(signal === undefined ? {} : { signal }),
      }),
    );
    if (!response.ok) throw await PlatformError.of(response);
    return (await response.json()) as T;
  }
}

/** What the pager reads of a query, whatever its model. */
interface SearchShape {
  readonly limit?: number;
  readonly offset?: number;
  readonly order?: readonly { readonly column: string; readonly direction?: 'asc' | 'desc' }[];
  readonly filters?: readonly unknown[];
}

/** The id order a search may be paged by (none, or by id alone, and room for one more filter). */
function keysetDirection(query: SearchShape): 'asc' | 'desc' | undefined {
  if ((query.filters?.length ?? 0) >= MAX_FILTERS) return undefined;
  const order = query.order ?? [];
  if (order.length === 0) return 'asc';
  if (order.length === 1 && order[0]!.column === 'id') return order[0]!.direction ?? 'asc';
  return undefined;
}

function writeHeaders(options: ChangeOptions): Record<string, string> {
  return {
    ...(options.idempotencyKey === undefined ? {} : { 'Idempotency-Key': options.idempotencyKey }),
    ...(options.respondAsync ? { Prefer: 'respond-async' } : {}),
    ...(options.ifMatch === undefined ? {} : { 'If-Match': `W/"${options.ifMatch}"` }),
  };
}

function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
