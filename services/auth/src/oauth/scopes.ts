import { parseScopeList, SCOPES, type Scope } from '@ofp/auth-tokens';

/**
 * The scopes a request gets (RFC 6749 §3.3): those it asks for, which must all be among `allowed`
 * (API.md §7: a request may only narrow), or all of `allowed` when it asks for none. Undefined when the
 * request asks for anything else (`invalid_scope`). The result is in the canonical order of SCOPES.
 */
export function narrowScopes(requested: string | undefined, allowed: readonly Scope[]): Scope[] | undefined {
  if (requested === undefined) return SCOPES.filter((s) => allowed.includes(s));
  const asked = parseScopeList(requested);
  if (asked === undefined || asked.some((s) => !(allowed as readonly string[]).includes(s))) return undefined;
  return SCOPES.filter((s) => asked.includes(s));
}

/** The `scope` parameter value for a list of scopes (RFC 6749 §3.3: space-delimited). */
export function scopeString(scopes: readonly Scope[]): string {
  return scopes.join(' ');
}
