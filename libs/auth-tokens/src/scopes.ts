/** The scopes of API.md §7: `read` (all GETs), `write` (integrator writes), `operations` (operator writes). */
export const SCOPES = ['read', 'write', 'operations'] as const;

export type Scope = (typeof SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/**
 * Splits a space-delimited `scope` value (RFC 6749 §3.3) into its distinct tokens, in order. Returns
 * undefined when the value is not a well-formed list (empty tokens, characters outside %x21 / %x23-5B /
 * %x5D-7E).
 */
export function parseScopeList(value: string): string[] | undefined {
  const tokens = value.split(' ');
  if (tokens.some((t) => !/^[\x21\x23-\x5b\x5d-\x7e]+$/.test(t))) return undefined;
  return [...new Set(tokens)];
}
