/** API.md §7: the token rotated out last may be presented once more within 60 s of its rotation. */
export const REFRESH_RETRY_WINDOW_MS = 60_000;

export type RefreshTokenState = 'active' | 'rotated' | 'superseded';

export interface PresentedRefreshToken {
  state: RefreshTokenState;
  expiresAt: Date;
  rotatedAt: Date | null;
  /** When it was already presented once more after its rotation. */
  retriedAt: Date | null;
}

/**
 * What a refresh request with this token does (API.md §7, RFC 9700 §4.14.2 rotation):
 * - `rotate`: the grant's current token: a new pair replaces it;
 * - `retry`: the token rotated out last, presented again within the window (a client that lost the
 *   response): a new pair replaces the one issued before, which stops working;
 * - `reuse`: any other rotated-out token, or a second retry: someone holds a copy, the grant is revoked;
 * - `expired`: the current token outlived its lifetime.
 */
export type RefreshDecision = 'rotate' | 'retry' | 'reuse' | 'expired';

export function decideRefresh(
  presented: PresentedRefreshToken,
  successorState: RefreshTokenState | undefined,
  now: Date,
): RefreshDecision {
  switch (presented.state) {
    case 'active':
      return presented.expiresAt > now ? 'rotate' : 'expired';
    case 'rotated': {
      const rotatedLast = successorState === 'active';
      const inWindow =
        presented.rotatedAt !== null &&
        now.getTime() - presented.rotatedAt.getTime() <= REFRESH_RETRY_WINDOW_MS;
      return rotatedLast && inWindow && presented.retriedAt === null ? 'retry' : 'reuse';
    }
    case 'superseded':
      return 'reuse';
    default: {
      const unhandled: never = presented.state;
      throw new Error(`unknown refresh token state ${String(unhandled)}`);
    }
  }
}
