import { BearerGate } from './bearer-gate.js';
import { RevocationDenyList } from './revocations.js';
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

describe("BearerGate.access with a service's own tokens", () => {
  const principal = (clientId: string) => ({
    clientId,
    orgId: 7,
    scopes: ['read' as const],
    tokenId: clientId,
    issuedAt: new Date(0),
    expiresAt: new Date(3_600_000),
  });
  const gate = new BearerGate(
    { verify: () => Promise.resolve(principal('jwt')) },
    new TokenBucketLimiter({ capacity: 10, refillPerSecond: 1 }, () => new Date(0)),
  );
  const local = {
    owns: (token: string) => token.startsWith('own_'),
    verify: () => Promise.resolve(principal('own')),
  };
  const request = (token: string) => ({
    id: 'r',
    method: 'GET' as const,
    url: '/v2/webhooks',
    headers: { authorization: `Bearer ${token}` },
    remoteAddress: '127.0.0.1',
    body: undefined,
  });

  it('verifies a token of its kind with it, and any other as a JWT', async () => {
    const access = gate.access(['read'], undefined, local);
    expect((await access.authenticate(request('own_abc'))).principal.clientId).toBe('own');
    expect((await access.authenticate(request('eyJ.x.y'))).principal.clientId).toBe('jwt');
  });

  it("refuses such a token once its client's tokens are revoked, as a JWT of that client", async () => {
    const revocations = new RevocationDenyList(() => new Date(0));
    const revoking = new BearerGate(
      { verify: () => Promise.resolve(principal('jwt')) },
      new TokenBucketLimiter({ capacity: 10, refillPerSecond: 1 }, () => new Date(0)),
      undefined,
      undefined,
      revocations,
    );
    const access = revoking.access(['read'], undefined, local);
    expect((await access.authenticate(request('own_abc'))).principal.clientId).toBe('own');
    revocations.add({ clientId: 'own', expiresAt: new Date(3_600_000) });
    await expect(access.authenticate(request('own_abc'))).rejects.toMatchObject({
      kind: 'Unauthenticated',
      errors: { base: ['The client of this token was disabled or its token revoked'] },
    });
  });

  it('takes such tokens only where a route names them', async () => {
    expect((await gate.access(['read']).authenticate(request('own_abc'))).principal.clientId).toBe('jwt');
  });
});
