import { bearerChallenge } from './http.js';

describe('bearerChallenge', () => {
  it('carries no error code when the request had no token (RFC 6750 §3.1)', () => {
    expect(bearerChallenge()).toBe('Bearer');
  });

  it('names the error, its description and the missing scope', () => {
    expect(bearerChallenge({ code: 'insufficient_scope', description: 'Needs write', scope: 'write' })).toBe(
      'Bearer error="insufficient_scope", error_description="Needs write", scope="write"',
    );
  });
});
