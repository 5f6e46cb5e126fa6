/**
 * `@ofp/client`: the order-fulfillment platform's API for integrators (README.md). `OfpClient` for
 * typed searches, reads, writes, all pages, the events feed and webhook verification, with tokens,
 * retries and idempotency keys handled; `createPlatformClient` for the bare typed client of every
 * operation (openapi-fetch).
 *
 * @packageDocumentation
 */
import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, paths } from './openapi.js';
import { tokenSource } from './tokens.js';

export type { components, operations, paths, webhooks } from './openapi.js';
export type { Events, Models } from './models.js';
export { PlatformError, type FieldErrors } from './errors.js';
export type { Credentials, TokenSource } from './tokens.js';
export { platformFetch, type RetryOptions, type TransportOptions } from './transport.js';
export {
  verifyWebhook,
  WebhookVerificationError,
  type IncomingHeaders,
  type WebhookEvent,
} from './webhooks.js';
export {
  OfpClient,
  type ChangeOptions,
  type CreatableModel,
  type DeletableModel,
  type EventStream,
  type EventType,
  type EventsOptions,
  type ModelName,
  type OfpClientOptions,
  type Page,
  type QueryOf,
  type RecordOf,
  type UpdatableModel,
  type WriteOptions,
} from './ofp-client.js';

/**
 * A schema of the API description by name: `Schema<'Person'>`, `Schema<'PeopleQuery'>` (a search's
 * `q`), `Schema<'PersonUpdatedEvent'>` (a webhook delivery's body).
 */
export type Schema<Name extends keyof components['schemas']> = components['schemas'][Name];

/** The platform's API, every path and operation typed by its OpenAPI document (`docs/openapi.json`). */
export type PlatformClient = Client<paths>;

export interface PlatformClientOptions extends Omit<ClientOptions, 'baseUrl'> {
  /** The platform's base URL (`http://localhost:8080`). */
  readonly baseUrl: string;
  /** A bearer token (API.md §7), sent with every request. */
  readonly token?: string;
}

/**
 * A bare typed client (openapi-fetch): `client.GET('/v2/people/{id}', { params: { path: { id } } })`
 * answers `{ data, error, response }`, `data` typed by the operation's success response and `error`
 * by its error responses. No retries and no token renewal: `OfpClient` has those, and its `api` is
 * this client through them.
 */
export function createPlatformClient({ token, ...options }: PlatformClientOptions): PlatformClient {
  return createClient<paths>({
    ...options,
    headers: { ...(token === undefined ? {} : { Authorization: `Bearer ${token}` }), ...options.headers },
  });
}

/** The `q` of a search (API.md §4), typed by the model's query schema, as the parameter carries it: JSON. */
export function searchQuery<Name extends keyof components['schemas'] & `${string}Query`>(
  query: Schema<Name>,
): string {
  return JSON.stringify(query);
}

/**
 * An access token of the client-credentials grant (RFC 6749 §4.4) for a client of the platform (one
 * that `orderctl create-client` made), with the client's scopes unless `scope` narrows them.
 */
export function clientCredentialsToken(
  baseUrl: string,
  credentials: { readonly clientId: string; readonly clientSecret: string; readonly scope?: string },
): Promise<string> {
  return tokenSource(baseUrl, credentials, (request) => fetch(request)).accessToken();
}
