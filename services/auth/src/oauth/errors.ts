import { jsonReply, type ErrorAnswer, type Reply } from '@ofp/http-api';

/**
 * The error codes of RFC 6749 §4.1.2.1 and §5.2, RFC 7009 §2.2.1, `invalid_dpop_proof` and
 * `use_dpop_nonce` (RFC 9449 §5, §8),
 * and `slow_down` (RFC 8628 §3.5, in the OAuth Extensions Error Registry for token endpoint responses)
 * for a 429: the client is to wait as `Retry-After` says. `server_error` and `temporarily_unavailable`
 * (§4.1.2.1) name a 500 and a 503 at every OAuth endpoint, as OpenID Connect's token endpoint uses them.
 */
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'unsupported_response_type'
  | 'invalid_scope'
  | 'unsupported_token_type'
  | 'invalid_dpop_proof'
  | 'use_dpop_nonce'
  | 'slow_down'
  | 'server_error'
  | 'temporarily_unavailable';

/** An OAuth error response: `{error, error_description}` with the status RFC 6749 §5.2 prescribes. */
export class OAuthError extends Error {
  override readonly name = 'OAuthError';
  constructor(
    readonly code: OAuthErrorCode,
    readonly description: string,
    readonly status = code === 'invalid_client' ? 401 : 400,
    readonly headers: Readonly<Record<string, string>> = {},
  ) {
    super(`${code}: ${description}`);
  }
}

/** The code of an error that is not an {@link OAuthError}, by its status. */
const CODE_BY_STATUS: Readonly<Record<number, OAuthErrorCode>> = {
  401: 'invalid_client',
  429: 'slow_down',
  500: 'server_error',
  503: 'temporarily_unavailable',
};

/**
 * Renders every error of an OAuth endpoint in RFC 6749 §5.2's format (API.md §7: "Errors follow RFC
 * 6749 §5.2"), never the /v2 envelope, which OAuth clients do not read: an {@link OAuthError} as it
 * is; anything else (a rate limit's 429, a 405, a 413, a database down's 503, a 500) with the status,
 * headers (`Retry-After`, `RateLimit-*`, `Allow`) and message the pipeline gives it, and the code of
 * its status (`invalid_request` for a client's mistake).
 */
export function oauthErrorReply(error: unknown, answer: () => ErrorAnswer): Reply {
  let oauth: OAuthError;
  if (error instanceof OAuthError) oauth = error;
  else {
    const { status, errors, headers = {} } = answer();
    const description = Object.values(errors)[0]?.[0] ?? 'The request failed';
    oauth = new OAuthError(CODE_BY_STATUS[status] ?? 'invalid_request', description, status, headers);
  }
  // RFC 6749 §5.1-5.2: token endpoint responses must not be cached.
  return jsonReply(
    oauth.status,
    { error: oauth.code, error_description: oauth.description },
    { ...oauth.headers, 'Cache-Control': 'no-store', Pragma: 'no-cache' },
  );
}
