import * as oauth from 'openid-client';
import { PlatformError } from './errors.js';

/** Where the client's bearer tokens come from (API.md §7). */
export interface TokenSource {
  /** A token to send now: the one kept while it is valid, else a new one. */
  accessToken(): Promise<string>;
  /** The platform refused `token` (expired or revoked): the next call gets a new one. */
  invalidate(token: string): void;
}

/** How the client authenticates. */
export type Credentials =
  /** A token obtained elsewhere; the client cannot renew it. */
  | { readonly token: string }
  /** The client-credentials grant (server to server): the client asks again when the token runs out. */
  | { readonly clientId: string; readonly clientSecret: string; readonly scope?: string }
  /**
   * A refresh token from the authorization-code grant: each refresh answers a new refresh token and
   * the old one stops working (API.md §7: a rotated-out token presented again revokes the grant), so
   * `onRefreshToken` must keep the new one where the next run will read it.
   */
  | {
      readonly clientId: string;
      readonly clientSecret: string;
      readonly refreshToken: string;
      readonly onRefreshToken: (refreshToken: string) => void | Promise<void>;
      readonly scope?: string;
    };

/** Renew a token this long before it expires, so that none expires on its way. */
const EARLY_RENEWAL_MS = 60_000;

/** The token source of `credentials`, against the platform at `baseUrl`. */
export function tokenSource(
  baseUrl: string,
  credentials: Credentials,
  fetch: (request: Request) => Promise<Response>,
  clock: () => number = Date.now,
): TokenSource {
  if ('token' in credentials) {
    return { accessToken: () => Promise.resolve(credentials.token), invalidate: () => {} };
  }
  return new GrantTokens(oauthConfiguration(baseUrl, credentials, fetch), credentials, clock);
}

/**
 * The OAuth client (openid-client) of the platform's authorization server: its token endpoint from
 * the base URL rather than from RFC 8414 discovery, so that a base URL other than the deployment's
 * `PUBLIC_URL` (a tunnel, an internal address) works too. Plain `http` is allowed when the base URL
 * says so (a local instance).
 */
function oauthConfiguration(
  baseUrl: string,
  credentials: { readonly clientId: string; readonly clientSecret: string },
  fetch: (request: Request) => Promise<Response>,
): oauth.Configuration {
  const base = baseUrl.replace(/\/+$/, '');
  const configuration = new oauth.Configuration(
    { issuer: base, token_endpoint: `${base}/oauth/token` },
    credentials.clientId,
    undefined,
    oauth.ClientSecretBasic(credentials.clientSecret),
  );
  if (new URL(base).protocol === 'http:') oauth.allowInsecureRequests(configuration);
  configuration[oauth.customFetch] = (url, options) => fetch(new Request(url, options as RequestInit));
  return configuration;
}

/** Tokens of the client-credentials or refresh-token grant, kept until shortly before they expire. */
class GrantTokens implements TokenSource {
  private current: { readonly token: string; readonly renewAt: number } | undefined;
  /** The request under way, which concurrent callers share (one refresh token is used once). */
  private pending: Promise<string> | undefined;
  private refreshToken: string | undefined;

  constructor(
    private readonly configuration: oauth.Configuration,
    private readonly credentials: Exclude<Credentials, { readonly token: string }>,
    private readonly clock: () => number,
  ) {
    this.refreshToken = 'refreshToken' in credentials ? credentials.refreshToken : undefined;
  }

  accessToken(): Promise<string> {
    if (this.current && this.clock() < this.current.renewAt) return Promise.resolve(this.current.token);
    this.pending ??= this.request().finally(() => (this.pending = undefined));
    return this.pending;
  }

  invalidate(token: string): void {
    if (this.current?.token === token) this.current = undefined;
  }

  private async request(): Promise<string> {
    const scope = this.credentials.scope === undefined ? {} : { scope: this.credentials.scope };
    let response: Awaited<ReturnType<typeof oauth.clientCredentialsGrant>>;
    try {
      response =
        this.refreshToken === undefined
          ? await oauth.clientCredentialsGrant(this.configuration, scope)
          : await oauth.refreshTokenGrant(this.configuration, this.refreshToken, scope);
    } catch (error) {
      throw tokenError(error);
    }
    if (this.refreshToken !== undefined && 'onRefreshToken' in this.credentials) {
      if (response.refresh_token === undefined)
        throw new Error('the token endpoint answered a refresh without a new refresh token');
      this.refreshToken = response.refresh_token;
      await this.credentials.onRefreshToken(response.refresh_token);
    }
    const lifetime = (response.expiresIn() ?? 0) * 1000;
    this.current = {
      token: response.access_token,
      renewAt: this.clock() + Math.max(0, lifetime - Math.min(EARLY_RENEWAL_MS, lifetime / 2)),
    };
    return response.access_token;
  }
}

/** A refused token request as a PlatformError (RFC 6749 §5.2's error and description). */
function tokenError(error: unknown): unknown {
  if (error instanceof oauth.ResponseBodyError)
    return new PlatformError(
      error.status,
      { base: [`${error.error}: ${error.error_description ?? ''}`] },
      error.response.headers.get('x-request-id') ?? undefined,
    );
  return error;
}
