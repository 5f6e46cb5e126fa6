import { jsonReply, type Reply } from '@ofp/runtime';

/** The error codes of RFC 6749 §4.1.2.1 and §5.2, RFC 7009 §2.2.1. */
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'unsupported_response_type'
  | 'invalid_scope'
  | 'unsupported_token_type';

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

/** Renders an {@link OAuthError} (RFC 6749 §5.2); anything else is left to the envelope. */
export function oauthErrorReply(error: unknown): Reply | undefined {
  if (!(error instanceof OAuthError)) return undefined;
  // RFC 6749 §5.1-5.2: token endpoint responses must not be cached.
  return jsonReply(
    error.status,
    { error: error.code, error_description: error.description },
    { ...error.headers, 'Cache-Control': 'no-store', Pragma: 'no-cache' },
  );
}
