import { decideRefresh, type PresentedRefreshToken } from './refresh-decision.js';

const now = new Date('2026-05-01T10:00:00Z');
const ago = (ms: number) => new Date(now.getTime() - ms);
const token = (overrides: Partial<PresentedRefreshToken>): PresentedRefreshToken => ({
  state: 'active',
  expiresAt: new Date(now.getTime() + 86_400_000),
  rotatedAt: null,
  retriedAt: null,
  ...overrides,
});

describe('decideRefresh', () => {
  it('rotates the current token', () => {
    expect(decideRefresh(token({}), undefined, now)).toBe('rotate');
  });

  it('refuses the current token once it expired', () => {
    expect(decideRefresh(token({ expiresAt: now }), undefined, now)).toBe('expired');
  });

  it('allows one retry of the token rotated out last, within 60 s', () => {
    const rotatedOut = token({ state: 'rotated', rotatedAt: ago(60_000) });
    expect(decideRefresh(rotatedOut, 'active', now)).toBe('retry');
  });

  it('treats a retry after 60 s as reuse', () => {
    const rotatedOut = token({ state: 'rotated', rotatedAt: ago(60_001) });
    expect(decideRefresh(rotatedOut, 'active', now)).toBe('reuse');
  });

  it('treats a second retry as reuse', () => {
    const retried = token({ state: 'rotated', rotatedAt: ago(10_000), retriedAt: ago(5_000) });
    expect(decideRefresh(retried, 'active', now)).toBe('reuse');
  });

  it('treats an older rotated-out token as reuse', () => {
    const older = token({ state: 'rotated', rotatedAt: ago(1_000) });
    expect(decideRefresh(older, 'rotated', now)).toBe('reuse');
  });

  it('treats the token of a superseded pair as reuse', () => {
    expect(decideRefresh(token({ state: 'superseded' }), undefined, now)).toBe('reuse');
  });
});
