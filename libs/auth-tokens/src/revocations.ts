import type { Clock } from './clock.js';

/**
 * An announcement that access tokens must be refused before they expire: every token of a grant
 * (`grantId`, the `gid` claim), one token (`tokenId`, its `jti`: a revoked client-credentials token, or
 * the pair a refresh retry superseded, API.md §7), or every token of a client (`clientId`: a disabled
 * client, whose client-credentials tokens are stored nowhere). `expiresAt` is when the last such token
 * expires; after that the announcement can be forgotten.
 */
export type Revocation = { expiresAt: Date } & (
  { grantId: string; tokenId?: string } | { tokenId: string } | { clientId: string }
);

/** The identifiers of a token a verifier asks about. */
export interface RevocableToken {
  readonly clientId: string;
  /** Absent for a client-credentials token, which belongs to no stored grant. */
  readonly grantId?: string | undefined;
  readonly tokenId: string;
}

/** What a verifier asks: has this token been revoked? */
export interface DenyList {
  isDenied(token: RevocableToken): boolean;
}

/**
 * The revoked grants, tokens and clients of a process, each kept until its tokens have expired.
 * Entries stay `retainMs` longer than announced, so that a verifier's clock tolerance on `exp` cannot
 * let a revoked token through after its entry was dropped.
 */
export class RevocationDenyList implements DenyList {
  private readonly grants = new Map<string, number>();
  private readonly tokens = new Map<string, number>();
  private readonly clients = new Map<string, number>();
  private readonly retainMs: number;

  constructor(
    private readonly clock: Clock,
    options: { retainMs?: number } = {},
  ) {
    this.retainMs = options.retainMs ?? 5 * 60_000;
  }

  add(revocation: Revocation): void {
    const now = this.clock().getTime();
    this.prune(now);
    const until = revocation.expiresAt.getTime() + this.retainMs;
    if (until <= now) return;
    const [entries, id] =
      'clientId' in revocation
        ? [this.clients, revocation.clientId]
        : revocation.tokenId !== undefined
          ? [this.tokens, revocation.tokenId]
          : [this.grants, (revocation as { grantId: string }).grantId];
    entries.set(id, Math.max(entries.get(id) ?? 0, until));
  }

  isDenied(token: RevocableToken): boolean {
    const now = this.clock().getTime();
    return (
      (this.tokens.get(token.tokenId) ?? 0) > now ||
      (this.clients.get(token.clientId) ?? 0) > now ||
      (token.grantId !== undefined && (this.grants.get(token.grantId) ?? 0) > now)
    );
  }

  /** Entries currently kept (for metrics and tests). */
  get size(): number {
    return this.grants.size + this.tokens.size + this.clients.size;
  }

  private prune(now: number): void {
    for (const entries of [this.grants, this.tokens, this.clients]) {
      for (const [id, until] of entries) if (until <= now) entries.delete(id);
    }
  }
}
