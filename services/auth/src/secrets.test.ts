import { digestSecret, newSecret, secretMatches } from './secrets.js';

describe('secrets', () => {
  it('are 256 random bits in base64url', () => {
    const secret = newSecret();
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(newSecret()).not.toBe(secret);
  });

  it('match their digest and nothing else', () => {
    const secret = newSecret();
    const digest = digestSecret(secret);
    expect(secretMatches(secret, digest)).toBe(true);
    expect(secretMatches(`${secret}x`, digest)).toBe(false);
    expect(secretMatches(secret, Buffer.alloc(3))).toBe(false);
  });
});
