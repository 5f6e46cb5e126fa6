import { BearerGate } from './bearer-gate.js';
import { TokenBucketLimiter } from './token-bucket.js';

describe('BearerGate.access', () => {
  const gate = new BearerGate(
    { verify: () => Promise.reject(new Error('not called')) },
    new TokenBucketLimiter({ capacity: 1, refillPerSecond: 1 }, () => new Date(0)),
  );

  it('gives the access of the scopes a route spec names', () => {
    expect(gate.access(['write', 'operations'])).toMatchObject({
      kind: 'bearer',
      scopes: ['write', 'operations'],
    });
    expect(gate.access([])).toMatchObject({ kind: 'bearer', scopes: [] });
  });

  it('refuses a scope that API.md §7 does not define, when the routes are bound', () => {
    expect(() => gate.access(['read', 'wirte'])).toThrow('not a scope: wirte');
  });
});
