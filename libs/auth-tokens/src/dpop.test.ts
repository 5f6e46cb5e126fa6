import { randomUUID } from 'node:crypto';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose';
import { accessTokenHash, DpopProofVerifier, type DpopRequest } from './dpop.js';

/** The proof checks of RFC 9449 §4.3, one refused case each. */
describe('DpopProofVerifier', () => {
  const url = 'https://platform.example/v2/orders';
  const token = 'an.access.token';
  let now = new Date('2026-11-27T12:00:00Z');
  const clock = () => now;
  let key: { privateKey: CryptoKey; jwk: JWK };
  let other: { privateKey: CryptoKey; jwk: JWK };

  async function keyPair(): Promise<{ privateKey: CryptoKey; jwk: JWK }> {
    const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
    return { privateKey, jwk: await exportJWK(publicKey) };
  }

  beforeAll(async () => {
    key = await keyPair();
    other = await keyPair();
  });
  beforeEach(() => {
    now = new Date('2026-11-27T12:00:00Z');
  });

  /** A proof for a GET of {@link url} with {@link token}, each claim and header overridable. */
  function proof(
    claims: Record<string, unknown> = {},
    header: Record<string, unknown> = {},
    signer = key,
  ): Promise<string> {
    return new SignJWT({
      jti: randomUUID(),
      htm: 'GET',
      htu: url,
      iat: Math.floor(now.getTime() / 1000),
      ath: accessTokenHash(token),
      ...claims,
    })
      .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: signer.jwk, ...header })
      .sign(signer.privateKey);
  }

  const request: DpopRequest = { method: 'GET', url, accessToken: token };
  const verifier = () => new DpopProofVerifier(clock);

  it('accepts a proof for the request and gives its key’s RFC 7638 thumbprint', async () => {
    await expect(verifier().verify(await proof(), request)).resolves.toEqual({
      jkt: await calculateJwkThumbprint(key.jwk, 'sha256'),
    });
  });

  it('compares htu without query or fragment, and with the URL’s normal form', async () => {
    const proofs = verifier();
    await expect(
      proofs.verify(await proof({ htu: 'HTTPS://Platform.example:443/v2/orders?x=1#f' }), {
        ...request,
        url: `${url}?page=2`,
      }),
    ).resolves.toHaveProperty('jkt');
  });

  it('refuses a proof presented a second time within the window (jti replay)', async () => {
    const proofs = verifier();
    const once = await proof();
    await proofs.verify(once, request);
    await expect(proofs.verify(once, request)).rejects.toThrow('The DPoP proof was used before (jti)');
    // The same jti under another key is another proof.
    const jti = randomUUID();
    await proofs.verify(await proof({ jti }), request);
    await expect(proofs.verify(await proof({ jti }, {}, other), request)).resolves.toHaveProperty('jkt');
  });

  it('refuses a proof for another method (htm) or another URL (htu)', async () => {
    await expect(verifier().verify(await proof({ htm: 'POST' }), request)).rejects.toThrow(
      'The DPoP proof is not for this method (htm)',
    );
    await expect(
      verifier().verify(await proof({ htu: 'https://platform.example/v2/items' }), request),
    ).rejects.toThrow('The DPoP proof is not for this URL (htu)');
    await expect(
      verifier().verify(await proof({ htu: 'http://platform.example/v2/orders' }), request),
    ).rejects.toThrow('(htu)');
    await expect(verifier().verify(await proof({ htu: 'not a url' }), request)).rejects.toThrow('(htu)');
  });

  it('refuses a stale proof, and one from the future, beyond the iat window', async () => {
    const iat = Math.floor(now.getTime() / 1000);
    await expect(verifier().verify(await proof({ iat: iat - 61 }), request)).rejects.toThrow(
      'The DPoP proof iat is more than 60 s from the server time',
    );
    await expect(verifier().verify(await proof({ iat: iat + 61 }), request)).rejects.toThrow('iat');
    await expect(verifier().verify(await proof({ iat: iat - 59 }), request)).resolves.toHaveProperty('jkt');
  });

  it('refuses a proof without ath, with the hash of another token, or with ath and no token', async () => {
    await expect(verifier().verify(await proof({ ath: undefined }), request)).rejects.toThrow(
      'The DPoP proof has no ath (the access token hash)',
    );
    await expect(
      verifier().verify(await proof({ ath: accessTokenHash('another.token') }), request),
    ).rejects.toThrow('The DPoP proof ath is not the hash of this access token');
    await expect(verifier().verify(await proof(), { method: 'GET', url })).rejects.toThrow(
      'The DPoP proof has an ath but no access token came with it',
    );
  });

  it('refuses another typ, a symmetric or unknown alg, a private or missing jwk, a bad signature', async () => {
    await expect(verifier().verify(await proof({}, { typ: 'JWT' }), request)).rejects.toThrow(
      'The DPoP proof is invalid: typ must be dpop+jwt',
    );
    const hmac = await new SignJWT({ jti: randomUUID(), htm: 'GET', htu: url, iat: 0 })
      .setProtectedHeader({ alg: 'HS256', typ: 'dpop+jwt' })
      .sign(new TextEncoder().encode('secret'));
    await expect(verifier().verify(hmac, request)).rejects.toThrow('alg must be one of');
    const { privateKey } = await generateKeyPair('ES256', { extractable: true });
    const privateJwk = await exportJWK(privateKey);
    await expect(verifier().verify(await proof({}, { jwk: privateJwk }), request)).rejects.toThrow(
      'its jwk header must be a public signing key',
    );
    await expect(verifier().verify(await proof({}, { jwk: undefined }), request)).rejects.toThrow(
      'its jwk header must be a public signing key',
    );
    // Signed by another key than the one it embeds.
    await expect(verifier().verify(await proof({}, { jwk: other.jwk }), request)).rejects.toThrow(
      'The DPoP proof is invalid: signature',
    );
    await expect(verifier().verify('not.a.jwt', request)).rejects.toThrow(
      'The DPoP proof is invalid: malformed',
    );
  });

  it('with nonces required, asks for the current one (use_dpop_nonce) and accepts it for two windows', async () => {
    const proofs = new DpopProofVerifier(clock, 'a-nonce-secret-of-at-least-32-characters');
    const missing: unknown = await proofs.verify(await proof(), request).catch((error: unknown) => error);
    expect(missing).toMatchObject({
      code: 'use_dpop_nonce',
      description: 'The DPoP proof must carry the server nonce (DPoP-Nonce)',
      nonce: proofs.nonce(),
    });
    const nonce = proofs.nonce();
    await expect(proofs.verify(await proof({ nonce }), request)).resolves.toHaveProperty('jkt');
    now = new Date(now.getTime() + 60_000);
    expect(proofs.nonce()).not.toBe(nonce);
    await expect(proofs.verify(await proof({ nonce }), request)).resolves.toHaveProperty('jkt');
    now = new Date(now.getTime() + 60_000);
    await expect(proofs.verify(await proof({ nonce }), request)).rejects.toMatchObject({
      code: 'use_dpop_nonce',
      description: 'The DPoP proof nonce is not current: use the DPoP-Nonce of this response',
    });
    // Another deployment's nonce (another secret), and one a client made up.
    const elsewhere = new DpopProofVerifier(clock, 'another-nonce-secret-of-32-characters!');
    await expect(proofs.verify(await proof({ nonce: elsewhere.nonce() }), request)).rejects.toMatchObject({
      code: 'use_dpop_nonce',
    });
    await expect(proofs.verify(await proof({ nonce: 'guess' }), request)).rejects.toMatchObject({
      code: 'use_dpop_nonce',
    });
    // Without a secret, no nonce is asked for or handed out.
    expect(verifier().nonce()).toBeUndefined();
  });

  it('refuses no proof, and two', async () => {
    await expect(verifier().verify(undefined, request)).rejects.toThrow(
      'Exactly one DPoP proof header is required',
    );
    const one = await proof();
    await expect(verifier().verify([one, one], request)).rejects.toThrow('Exactly one');
    await expect(verifier().verify(`${one}, ${one}`, request)).rejects.toThrow('Exactly one');
  });
});
