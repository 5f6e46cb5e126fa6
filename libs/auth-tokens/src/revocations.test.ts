import { RevocationDenyList } from './revocations.js';

describe('RevocationDenyList', () => {
  let now: number;
  const clock = () => new Date(now);
  beforeEach(() => {
    now = Date.parse('2026-01-01T00:00:00Z');
  });

  it('denies every token of a revoked grant', () => {
    const list = new RevocationDenyList(clock, { retainMs: 0 });
    list.add({ grantId: 'g1', expiresAt: new Date(now + 60_000) });
    expect(list.isDenied({ clientId: 'c1', grantId: 'g1', tokenId: 'any-token' })).toBe(true);
    expect(list.isDenied({ clientId: 'c1', grantId: 'g2', tokenId: 'any-token' })).toBe(false);
  });

  it('denies only the named token when a revocation names one', () => {
    const list = new RevocationDenyList(clock, { retainMs: 0 });
    list.add({ grantId: 'g1', tokenId: 't1', expiresAt: new Date(now + 60_000) });
    expect(list.isDenied({ clientId: 'c1', grantId: 'g1', tokenId: 't1' })).toBe(true);
    expect(list.isDenied({ clientId: 'c1', grantId: 'g1', tokenId: 't2' })).toBe(false);
  });

  it('denies a token without a grant by its id, and every token of a revoked client', () => {
    const list = new RevocationDenyList(clock, { retainMs: 0 });
    list.add({ tokenId: 't1', expiresAt: new Date(now + 60_000) });
    expect(list.isDenied({ clientId: 'c1', tokenId: 't1' })).toBe(true);
    expect(list.isDenied({ clientId: 'c1', tokenId: 't2' })).toBe(false);
    list.add({ clientId: 'c2', expiresAt: new Date(now + 60_000) });
    expect(list.isDenied({ clientId: 'c2', tokenId: 't3' })).toBe(true);
    expect(list.isDenied({ clientId: 'c2', grantId: 'g9', tokenId: 't4' })).toBe(true);
    expect(list.isDenied({ clientId: 'c3', tokenId: 't3' })).toBe(false);
  });

  it('keeps an entry until its tokens expired plus the retention, then forgets it', () => {
    const list = new RevocationDenyList(clock, { retainMs: 30_000 });
    list.add({ grantId: 'g1', expiresAt: new Date(now + 60_000) });
    now += 89_000;
    expect(list.isDenied({ clientId: 'c1', grantId: 'g1', tokenId: 't' })).toBe(true);
    now += 1_000;
    expect(list.isDenied({ clientId: 'c1', grantId: 'g1', tokenId: 't' })).toBe(false);
    list.add({ grantId: 'g2', expiresAt: new Date(now + 1_000) });
    expect(list.size).toBe(1);
  });

  it('ignores announcements whose tokens are already gone', () => {
    const list = new RevocationDenyList(clock, { retainMs: 0 });
    list.add({ grantId: 'g1', expiresAt: new Date(now - 1) });
    expect(list.size).toBe(0);
  });

  it('keeps the later expiry when a grant is announced twice', () => {
    const list = new RevocationDenyList(clock, { retainMs: 0 });
    list.add({ grantId: 'g1', expiresAt: new Date(now + 60_000) });
    list.add({ grantId: 'g1', expiresAt: new Date(now + 10_000) });
    now += 30_000;
    expect(list.isDenied({ clientId: 'c1', grantId: 'g1', tokenId: 't' })).toBe(true);
  });
});
