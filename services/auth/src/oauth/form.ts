import { OAuthError } from './errors.js';

/** The parameters of a form-encoded OAuth request, each present at most once. */
export type OAuthParams = ReadonlyMap<string, string>;

/**
 * Reads one value per name from URL-encoded parameters. RFC 6749 §3.1-3.2: parameters without a value
 * count as omitted, and a parameter sent more than once makes the request invalid.
 */
export function singleValued(params: URLSearchParams): OAuthParams {
  const values = new Map<string, string>();
  for (const name of new Set(params.keys())) {
    const given = params.getAll(name).filter((v) => v !== '');
    if (given.length > 1) throw new OAuthError('invalid_request', `The ${name} parameter is repeated`);
    if (given[0] !== undefined) values.set(name, given[0]);
  }
  return values;
}

const FORM = /^application\/x-www-form-urlencoded\s*(?:;|$)/i;

/**
 * The parameters of an `application/x-www-form-urlencoded` body (RFC 6749 §3.2, RFC 7009 §2.1, RFC
 * 7662 §2.1), read as text by the route (`body: 'form'`). Other content types are an `invalid_request`.
 */
export function parseForm(contentType: string | undefined, body: unknown): OAuthParams {
  if (!FORM.test(contentType ?? '') || typeof body !== 'string') {
    throw new OAuthError('invalid_request', 'The request body must be application/x-www-form-urlencoded');
  }
  return singleValued(new URLSearchParams(body));
}
