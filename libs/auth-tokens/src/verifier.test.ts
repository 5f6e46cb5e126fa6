import { createHmac, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { createLocalJWKSet, SignJWT } from 'jose';
import { RevocationDenyList } from './revocations.js';
import { createTokenVerifier, TokenRejectedError, type TokenVerifier } from './verifier.js';

const ISSUER = 'https://auth.example.test';
const T0 = Date.parse('2026-03-01T12:00:00Z');

function rsaKeys(): { publicKey: KeyObject; privateKey: KeyObject } {
  return generateKeyPairSync('rsa', { modulusLength: 2048 });
}

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

describe('createTokenVerifier', () => {
  const published = rsaKeys();
  const other = rsaKeys();
  let now: number;
  let denyList: RevocationDenyList;
  let verifier: TokenVerifier;
  const claims = () => ({
    iss: ISSUER,
    aud: ISSUER,
    sub: 'client-1',
    client_id: 'client-1',
    org: 7,
    scope: 'read write',
    gid: 'grant-1',
    jti: 'token-1',
    iat: Math.floor(T0 / 1000),
    exp: Math.floor(T0 / 1000) + 10800,
  });
  const sign = (
    payload: object,
    key: KeyObject = published.privateKey,
    kid: string | null = 'k1',
    typ: string | null = 'at+jwt',
  ) =>
    new SignJWT({ ...payload })
      .setProtectedHeader({
        alg: 'RS256',
        ...(kid === null ? {} : { kid }),
        ...(typ === null ? {} : { typ }),
      })
      .sign(key);

  beforeEach(() => {
    now = T0;
    const clock = () => new Date(now);
    denyList = new RevocationDenyList(clock);
    verifier = createTokenVerifier({
      issuer: ISSUER,
      keys: createLocalJWKSet({
        keys: [{ ...published.publicKey.export({ format: 'jwk' }), kid: 'k1', use: 'sig', alg: 'RS256' }],
      }),
      denyList,
      clock,
    });
  });

  const rejection = async (token: string) => {
    const error: unknown = await verifier.verify(token).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(TokenRejectedError);
    return (error as TokenRejectedError).description;
  };

  it('accepts a token signed by a published key and returns who it speaks for', async () => {
    await expect(verifier.verify(await sign(claims()))).resolves.toEqual({
      clientId: 'client-1',
      orgId: 7,
      scopes: ['read', 'write'],
      grantId: 'grant-1',
      tokenId: 'token-1',
      issuedAt: new Date(Math.floor(T0 / 1000) * 1000),
      expiresAt: new Date((Math.floor(T0 / 1000) + 10800) * 1000),
    });
  });

  it('accepts the typ as the full media type, in any case (RFC 9068 §4)', async () => {
    const token = await sign(claims(), published.privateKey, 'k1', 'Application/AT+JWT');
    await expect(verifier.verify(token)).resolves.toMatchObject({ clientId: 'client-1' });
  });

  it('refuses a JWT that is not typed as an access token (an ID token, say)', async () => {
    expect(await rejection(await sign(claims(), published.privateKey, 'k1', 'JWT'))).toBe(
      'The token is not an access token (typ at+jwt)',
    );
    expect(await rejection(await sign(claims(), published.privateKey, 'k1', null))).toBe(
      'The token is not an access token (typ at+jwt)',
    );
  });

  it('refuses a token meant for another audience, or for none', async () => {
    expect(await rejection(await sign({ ...claims(), aud: 'https://other.example.test' }))).toBe(
      'The access token is meant for another audience',
    );
    const { aud: _aud, ...rest } = claims();
    expect(await rejection(await sign(rest))).toBe('The access token is meant for another audience');
    await expect(
      verifier.verify(await sign({ ...claims(), aud: ['https://other.example.test', ISSUER] })),
    ).resolves.toBeDefined();
  });

  it('still checks expiry and revocation of a token it verified before', async () => {
    const token = await sign(claims());
    await verifier.verify(token);
    now = T0 + (10800 + 31) * 1000;
    expect(await rejection(token)).toBe('The access token expired');
    now = T0;
    await verifier.verify(token);
    denyList.add({ grantId: 'grant-1', expiresAt: new Date(T0 + 10800 * 1000) });
    expect(await rejection(token)).toBe('The access token was revoked');
  });

  it('refuses an unsigned token (alg none)', async () => {
    const token = `${base64url({ alg: 'none', typ: 'at+jwt', kid: 'k1' })}.${base64url(claims())}.`;
    expect(await rejection(token)).toBe('The access token is not signed with RS256');
  });

  it('refuses HS256 keyed with the public key', async () => {
    const secret = published.publicKey.export({ type: 'spki', format: 'pem' });
    const input = `${base64url({ alg: 'HS256', typ: 'at+jwt', kid: 'k1' })}.${base64url(claims())}`;
    const token = `${input}.${createHmac('sha256', secret).update(input).digest('base64url')}`;
    expect(await rejection(token)).toBe('The access token is not signed with RS256');
  });

  it('refuses a token signed by another key under a published kid', async () => {
    expect(await rejection(await sign(claims(), other.privateKey))).toBe(
      'The access token signature is invalid',
    );
  });

  it('refuses a token whose kid is not published', async () => {
    expect(await rejection(await sign(claims(), other.privateKey, 'k2'))).toBe(
      'The access token is signed with an unknown key',
    );
  });

  it('refuses a token with a tampered payload', async () => {
    const [header, , signature] = (await sign(claims())).split('.');
    const token = `${header}.${base64url({ ...claims(), org: 8 })}.${signature}`;
    expect(await rejection(token)).toBe('The access token signature is invalid');
  });

  it('refuses an expired token beyond the clock tolerance', async () => {
    const token = await sign(claims());
    now = T0 + 10800_000 + 29_000;
    await expect(verifier.verify(token)).resolves.toBeDefined();
    now = T0 + 10800_000 + 31_000;
    expect(await rejection(token)).toBe('The access token expired');
  });

  it('refuses a token that is not valid yet', async () => {
    expect(await rejection(await sign({ ...claims(), nbf: Math.floor(T0 / 1000) + 600 }))).toBe(
      'The access token is not valid yet',
    );
  });

  it('refuses a token of another issuer', async () => {
    expect(await rejection(await sign({ ...claims(), iss: 'https://evil.example.test' }))).toBe(
      'The access token has another issuer',
    );
  });

  it('refuses a token without the client_id claim (RFC 9068 §2.2)', async () => {
    const { client_id: _clientId, ...rest } = claims();
    expect(await rejection(await sign(rest))).toBe('The access token lacks required claims');
  });

  it('refuses a token that names no key', async () => {
    expect(await rejection(await sign(claims(), published.privateKey, null))).toBe(
      'The access token names no signing key',
    );
  });

  it('refuses a token without an expiry', async () => {
    const { exp: _exp, ...rest } = claims();
    expect(await rejection(await sign(rest))).toBe('The access token lacks required claims');
  });

  it('accepts a token without a grant id (client credentials), revoked by its id or its client', async () => {
    const { gid: _gid, ...rest } = claims();
    const context = await verifier.verify(await sign(rest));
    expect(context.grantId).toBeUndefined();
    denyList.add({ tokenId: 'token-1', expiresAt: new Date(T0 + 10800_000) });
    expect(await rejection(await sign(rest))).toBe('The access token was revoked');
    const another = await sign({ ...rest, jti: 'token-2' });
    await verifier.verify(another);
    denyList.add({ clientId: 'client-1', expiresAt: new Date(T0 + 10800_000) });
    expect(await rejection(another)).toBe('The access token was revoked');
  });

  it('refuses a token of a revoked grant, and a revoked token', async () => {
    const token = await sign(claims());
    denyList.add({ grantId: 'grant-1', expiresAt: new Date(T0 + 10800_000) });
    expect(await rejection(token)).toBe('The access token was revoked');
    const sibling = await sign({ ...claims(), gid: 'grant-2', jti: 'token-2' });
    denyList.add({ grantId: 'grant-2', tokenId: 'token-2', expiresAt: new Date(T0 + 10800_000) });
    expect(await rejection(sibling)).toBe('The access token was revoked');
  });

  it('refuses garbage', async () => {
    expect(await rejection('not-a-jwt')).toBe('The access token is malformed');
  });

  it('drops scopes the platform does not know', async () => {
    const context = await verifier.verify(await sign({ ...claims(), scope: 'read admin' }));
    expect(context.scopes).toEqual(['read']);
  });
});
