import type { Clock } from './clock.js';

/**
 * An announcement that access tokens must be refused before they expire: every token of the grant
 * (`gid` claim), or, with `tokenId`, only the one token with that `jti` (a refresh retry supersedes the
 * pair issued before it, API.md §7). `expiresAt` is when the last such token expires; after that the
 * announcement can be forgotten.
 */
export interface Revocation {
  grantId: string;
  tokenId?: string;
  expiresAt: Date;
}

/** What a verifier asks: has this token been revoked? */
export interface DenyList {
  isDenied(grantId: string, tokenId: string): boolean;
}

/**
 * The revoked grants and tokens of a process, each kept until its tokens have expired. Entries stay
 * `retainMs` longer than announced, so that a verifier's clock tolerance on `exp` cannot let a revoked
 * token through after its entry was dropped.
 */
export class RevocationDenyList implements DenyList {
  private readonly grants = new Map<string, number>();
  private readonly tokens = new Map<string, number>();
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
    const entries = revocation.tokenId === undefined ? this.grants : this.tokens;
    const id = revocation.tokenId ?? revocation.grantId;
    entries.set(id, Math.max(entries.get(id) ?? 0, until));
  }

  isDenied(grantId: string, tokenId: string): boolean {
    const now = this.clock().getTime();
    return (this.grants.get(grantId) ?? 0) > now || (this.tokens.get(tokenId) ?? 0) > now;
  }

  /** Entries currently kept (for metrics and tests). */
  get size(): number {
    return this.grants.size + this.tokens.size;
  }

  private prune(now: number): void {
    for (const entries of [this.grants, this.tokens]) {
      for (const [id, until] of entries) if (until <= now) entries.delete(id);
    }
  }
}
