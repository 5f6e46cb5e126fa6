import * as oidc from 'openid-client';
import type { RunningPlatform } from './platform-processes.js';

export interface ApiResponse<T = unknown> {
  readonly status: number;
  readonly headers: Headers;
  readonly body: T;
  /** The body as it came, byte for byte. */
  readonly text: string;
}

/** The envelope of API.md §2, loosely typed for tests. */
export interface Envelope<R = unknown> {
  count: number;
  total_results?: number;
  offset?: number;
  results: R;
  errors: Record<string, string[]> | null;
}

/** An integrator as a test sees it: an organization, a client of it, and its bearer token. */
export interface Integrator {
  readonly organizationId: number;
  readonly clientId: string;
  readonly clientSecret: string;
  /** The bearer token of the client-credentials grant (all the client's scopes). */
  readonly accessToken: string;
  /** Sends a request to the platform with this integrator's token. */
  request<R = unknown>(
    method: string,
    path: string,
    options?: { body?: unknown; headers?: Record<string, string> },
  ): Promise<ApiResponse<Envelope<R>>>;
}

/**
 * Creates an organization and a client through the admin API, and gets the client a token with the
 * client-credentials grant through openid-client (a real OAuth client, RFC 8414 discovery).
 */
export async function createIntegrator(
  platform: RunningPlatform,
  options: { name: string; scopes?: readonly string[] } = { name: 'Integrator' },
): Promise<Integrator> {
  const admin = async (path: string, body: unknown): Promise<{ results: Record<string, unknown> }> => {
    const response = await fetch(`${platform.adminUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${platform.adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
    return (await response.json()) as { results: Record<string, unknown> };
  };
  const scopes = options.scopes ?? ['read', 'write', 'operations'];
  const organization = await admin('/admin/organizations', { name: options.name });
  const organizationId = organization.results.id as number;
  const client = await admin(`/admin/organizations/${organizationId}/clients`, {
    name: `${options.name} client`,
    redirect_uri: 'http://localhost:3000/callback',
    scopes,
  });
  const clientId = client.results.client_id as string;
  const clientSecret = client.results.client_secret as string;
  const config = await oidc.discovery(new URL(platform.authUrl), clientId, clientSecret, undefined, {
    algorithm: 'oauth2',
    execute: [oidc.allowInsecureRequests],
  });
  const { access_token: token } = await oidc.clientCredentialsGrant(config, { scope: scopes.join(' ') });
  return {
    organizationId,
    clientId,
    clientSecret,
    accessToken: token,
    async request<R>(
      method: string,
      path: string,
      requestOptions: { body?: unknown; headers?: Record<string, string> } = {},
    ) {
      const headers: Record<string, string> = { authorization: `Bearer ${token}`, ...requestOptions.headers };
      let body: string | undefined;
      if (requestOptions.body !== undefined) {
        body =
          typeof requestOptions.body === 'string' ? requestOptions.body : JSON.stringify(requestOptions.body);
        headers['content-type'] ??= 'application/json';
      }
      const base = baseUrlOf(platform, path);
      const response = await fetch(`${base}${path}`, {
        method,
        headers,
        ...(body === undefined ? {} : { body }),
      });
      const text = await response.text();
      return {
        status: response.status,
        headers: response.headers,
        body: (text ? JSON.parse(text) : null) as Envelope<R>,
        text,
      };
    },
  };
}

/**
 * A `fetch` that sends each request to the process that answers its path, as the ingress routes it:
 * for a client made with one base URL (`@ofp/client`) against either run mode.
 */
export function ingressFetch(platform: RunningPlatform): (request: Request) => Promise<Response> {
  return (request) => {
    const url = new URL(request.url);
    return fetch(new Request(`${baseUrlOf(platform, url.pathname)}${url.pathname}${url.search}`, request));
  };
}

/** Which process answers a path, as the ingress routes it (charts/ofp/templates/ingress.yaml). */
function baseUrlOf(platform: RunningPlatform, path: string): string {
  if (/^\/((api\/)?v2\/authenticate\b|oauth\/|\.well-known\/)/.test(path)) return platform.authUrl;
  if (/^\/((api\/)?v2\/(webhooks|webhook_deliveries|webhook_event_types)|portal)\b/.test(path))
    return platform.webhooksUrl;
  return platform.apiUrl;
}

/** `/v2/<model>?q=<escaped JSON>`. */
export function searchPath(model: string, q: unknown): string {
  return `/v2/${model}?q=${encodeURIComponent(JSON.stringify(q))}`;
}

/** The quantities of an inventory record (API.md §8). */
export interface StockQuantities {
  on_hand: number;
  committed: number;
  available: number;
  inbound: number;
}

/** The stock of a (sku, warehouse) as the inventory search shows it; undefined while it has no record. */
export async function stockOf(
  integrator: Integrator,
  sku: string,
  warehouse: string,
): Promise<StockQuantities | undefined> {
  const response = await integrator.request<StockQuantities[]>(
    'GET',
    searchPath('inventory', {
      filters: [
        { operand: 'sku', operator: '=', value: sku },
        { operand: 'warehouse', operator: '=', value: warehouse },
      ],
    }),
  );
  const found = response.body.results[0];
  return (
    found && {
      on_hand: found.on_hand,
      committed: found.committed,
      available: found.available,
      inbound: found.inbound,
    }
  );
}
