import { isIP } from 'node:net';
import type { AddressGuard, HostResolver } from '../delivery/address-guard.js';

/** The settings that let a deployment send webhooks to non-public targets (docs/configuration.md). */
const ALLOW_PRIVATE = 'WEBHOOK_ALLOW_PRIVATE_TARGETS=true';
const ALLOWING = `a deployment allows such targets with ${ALLOW_PRIVATE}, or WEBHOOK_ALLOWED_NETWORKS for given CIDR blocks`;

/**
 * How long a webhook write waits for its URL's host to resolve. A resolver that drops a query answers
 * after its own timeout (glibc's is 5 s, the whole request deadline of API.md §3): one lookup in thirty
 * did so on the development machine, and the write then answered 503.
 */
export const RESOLVE_TIMEOUT_MS = 1_000;

/**
 * Which URLs a webhook may have (API.md §8): `https` to a public address, or anything `http(s)` when the
 * deployment allows private targets. A host name is resolved and judged by what it resolves to now;
 * one that does not resolve yet, or not within {@link RESOLVE_TIMEOUT_MS}, is accepted, since every
 * delivery resolves and judges it again.
 */
export class UrlPolicy {
  constructor(
    private readonly guard: AddressGuard,
    private readonly resolve: HostResolver,
    private readonly resolveTimeoutMs = RESOLVE_TIMEOUT_MS,
  ) {}

  /** Why `url` may not be a webhook URL, or undefined when it may. */
  async problem(url: string): Promise<string | undefined> {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      return 'must be an absolute URL';
    }
    const allowPrivate = this.guard.policy.allowPrivateTargets;
    if (parsed.protocol !== 'https:' && !(allowPrivate && parsed.protocol === 'http:'))
      return allowPrivate
        ? 'must be an http or https URL'
        : `must be an https URL (plain http is allowed only where the deployment sets ${ALLOW_PRIVATE})`;
    // Credentials in the URL would be shown by every GET and written to logs.
    if (parsed.username !== '' || parsed.password !== '') return 'must not contain credentials';
    const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIP(host) !== 0) {
      const reason = this.guard.refusal(host);
      return reason === undefined
        ? undefined
        : `must point to a public address (${host} is ${reason}; ${ALLOWING})`;
    }
    if (allowPrivate) return undefined;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), this.resolveTimeoutMs);
    });
    const addresses = await Promise.race([this.resolve(host).catch(() => undefined), late]).finally(() =>
      clearTimeout(timer),
    );
    if (addresses === undefined) return undefined;
    for (const { address } of addresses) {
      const reason = this.guard.refusal(address);
      if (reason !== undefined)
        return `must point to a public address (${host} resolves to ${address}, ${reason}; ${ALLOWING})`;
    }
    return undefined;
  }
}
