/**
 * The issuer identifier for a deployment's public base URL (API.md §7: `PUBLIC_URL`), without a
 * trailing slash, as the auth service writes it into `iss` and RFC 8414 metadata and verifiers expect it.
 */
export function issuerFromPublicUrl(publicUrl: string): string {
  return new URL(publicUrl).href.replace(/\/+$/, '');
}
