import createClient, { type Client, type ClientOptions } from 'openapi-fetch';
import type { components, paths } from './openapi.js';

export type { components, operations, paths, webhooks } from './openapi.js';

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
 * A typed client (openapi-fetch): `client.GET('/v2/people/{id}', { params: { path: { id } } })`
 * answers `{ data, error, response }`, `data` typed by the operation's success response and `error`
 * by its error responses.
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
export async function clientCredentialsToken(
  baseUrl: string,
  credentials: { readonly clientId: string; readonly clientSecret: string; readonly scope?: string },
): Promise<string> {
  // RFC 6749 §2.3.1: the id and the secret are form-encoded before they are joined.
  const basic = Buffer.from(
    `${encodeURIComponent(credentials.clientId)}:${encodeURIComponent(credentials.clientSecret)}`,
  ).toString('base64');
  const { data, error, response } = await createClient<paths>({ baseUrl }).POST('/oauth/token', {
    body: {
      grant_type: 'client_credentials',
      ...(credentials.scope === undefined ? {} : { scope: credentials.scope }),
    },
    bodySerializer: (body) => new URLSearchParams(body as Record<string, string>).toString(),
    headers: { Authorization: `Basic ${basic}`, 'Content-Type': 'application/x-www-form-urlencoded' },
  });
  if (data === undefined) {
    const reason = error && 'error_description' in error ? error.error_description : JSON.stringify(error);
    throw new Error(`the token request was refused (${response.status}): ${reason}`);
  }
  return data.access_token;
}
