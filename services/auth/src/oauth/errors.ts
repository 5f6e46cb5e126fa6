import { isDomainError } from '@ofp/contracts';
import { jsonReply, type Reply } from '@ofp/http-api';

/**
 * The error codes of RFC 6749 §4.1.2.1 and §5.2, RFC 7009 §2.2.1, `invalid_dpop_proof` and
 * `use_dpop_nonce` (RFC 9449 §5, §8),
 * and `slow_down` (RFC 8628 §3.5, in the OAuth Extensions Error Registry for token endpoint responses)
 * for a 429: the client is to wait as `Retry-After` says.
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
  | 'slow_down';

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

/**
 * Renders an {@link OAuthError} (RFC 6749 §5.2), and a rate limit's 429 in the same format (with its
 * `Retry-After` and `RateLimit-*` headers); anything else is left to the envelope.
 */
export function oauthErrorReply(error: unknown): Reply | undefined {
  let oauth: OAuthError;
  if (error instanceof OAuthError) oauth = error;
  else if (isDomainError(error) && error.kind === 'RateLimited') {
    oauth = new OAuthError('slow_down', error.errors.base?.[0] ?? 'Too many requests', 429, error.headers);
  } else return undefined;
  // RFC 6749 §5.1-5.2: token endpoint responses must not be cached.
  return jsonReply(
    oauth.status,
    { error: oauth.code, error_description: oauth.description },
    { ...oauth.headers, 'Cache-Control': 'no-store', Pragma: 'no-cache' },
  );
}
