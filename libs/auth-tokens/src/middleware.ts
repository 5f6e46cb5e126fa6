import type { Request, RequestHandler } from 'express';
import { baseError } from '@ofp/contracts';
import { KeySourceUnavailableError } from './jwks.js';
import type { Scope } from './scopes.js';
import { TokenRejectedError, type AuthContext, type TokenVerifier } from './verifier.js';

declare module 'express-serve-static-core' {
  interface Request {
    /** Set by {@link requireBearer} once the request's access token is verified. */
    auth?: AuthContext;
  }
}

/**
 * A `WWW-Authenticate: Bearer` challenge (RFC 6750 §3). Without an error code when the request carried
 * no token (§3.1: the client may not know it needs one); attribute values are quoted strings, and the
 * descriptions this library produces stay inside the characters §3 allows.
 */
export function bearerChallenge(error?: { code: string; description?: string; scope?: string }): string {
  if (error === undefined) return 'Bearer';
  const attributes = [`error="${error.code}"`];
  if (error.description !== undefined) attributes.push(`error_description="${error.description}"`);
  if (error.scope !== undefined) attributes.push(`scope="${error.scope}"`);
  return `Bearer ${attributes.join(', ')}`;
}

// RFC 6750 §2.1: `Bearer` (any case), one or more spaces, a token68.
const AUTHORIZATION = /^Bearer +([A-Za-z0-9\-._~+/]+=*)$/i;
const SCHEME = /^Bearer(?: |$)/i;

/**
 * Verifies the bearer token of an `Authorization` header. Failures throw 401 errors with the RFC 6750
 * §3 challenge (API.md §3); an unreachable issuer is a 503.
 */
export async function verifyBearer(
  verifier: TokenVerifier,
  header: string | undefined,
): Promise<AuthContext> {
  if (header === undefined || !SCHEME.test(header)) {
    throw baseError('Unauthenticated', 'An access token is required', {
      'WWW-Authenticate': bearerChallenge(),
    });
  }
  const token = AUTHORIZATION.exec(header)?.[1];
  try {
    if (token === undefined) throw new TokenRejectedError('The access token is malformed');
    return await verifier.verify(token);
  } catch (error) {
    if (error instanceof KeySourceUnavailableError) {
      throw baseError('Unavailable', 'Access tokens cannot be verified right now');
    }
    if (!(error instanceof TokenRejectedError)) throw error;
    throw baseError('Unauthenticated', error.description, {
      'WWW-Authenticate': bearerChallenge({ code: 'invalid_token', description: error.description }),
    });
  }
}

/** Requires a valid access token in the `Authorization` header (see {@link verifyBearer}) and sets `req.auth`. */
export function requireBearer(verifier: TokenVerifier): RequestHandler {
  return async (req, _res, next) => {
    req.auth = await verifyBearer(verifier, req.get('authorization'));
    next();
  };
}

/** Throws a 403 with `error="insufficient_scope"` (RFC 6750 §3.1) unless the token has `scope`. */
export function checkScope(auth: AuthContext, scope: Scope): void {
  if (!auth.scopes.includes(scope)) {
    const description = `The access token lacks the ${scope} scope`;
    throw baseError('Forbidden', description, {
      'WWW-Authenticate': bearerChallenge({ code: 'insufficient_scope', description, scope }),
    });
  }
}

/** Requires `scope` in the verified token (after {@link requireBearer}); see {@link checkScope}. */
export function requireScope(scope: Scope): RequestHandler {
  return (req, _res, next) => {
    checkScope(authOf(req), scope);
    next();
  };
}

/** The verified token of a request behind {@link requireBearer}. */
export function authOf(req: Request): AuthContext {
  if (req.auth === undefined) {
    throw baseError('Unauthenticated', 'An access token is required', {
      'WWW-Authenticate': bearerChallenge(),
    });
  }
  return req.auth;
}
