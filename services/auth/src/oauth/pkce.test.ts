import { isS256Challenge, verifierMatches } from './pkce.js';

// RFC 7636 Appendix B.
const VERIFIER = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
const CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';

describe('PKCE S256', () => {
  it('accepts the verifier of RFC 7636 Appendix B', () => {
    expect(verifierMatches(VERIFIER, CHALLENGE)).toBe(true);
  });

  it('refuses another verifier', () => {
    expect(verifierMatches(`${VERIFIER.slice(0, -1)}Y`, CHALLENGE)).toBe(false);
  });

  it('refuses the challenge itself as verifier (the plain method)', () => {
    expect(verifierMatches(CHALLENGE, CHALLENGE)).toBe(false);
  });

  it('refuses verifiers outside 43..128 unreserved characters', () => {
    const short = 'a'.repeat(42);
    expect(verifierMatches(short, 'x')).toBe(false);
    expect(verifierMatches(`${VERIFIER} `, CHALLENGE)).toBe(false);
  });

  it('recognizes the shape of an S256 challenge', () => {
    expect(isS256Challenge(CHALLENGE)).toBe(true);
    expect(isS256Challenge('plain-verifier-of-the-wrong-length')).toBe(false);
  });
});
