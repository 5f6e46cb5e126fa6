/**
 * What checking a DPoP proof (RFC 9449 §4.3) costs a service per request, measured: DpopProofVerifier's
 * verify (jose's jwtVerify with the embedded key, then htm, htu, iat, ath, the RFC 7638 thumbprint and
 * the replay memory) against the raw baseline of the same work's core, jose's jwtVerify of the same
 * ES256 proofs with their embedded key, in the same run. CPU time of this process per proof (the proofs
 * are signed beforehand, outside both measurements), after a warm-up of each.
 *
 *   npm run bench:dpop   (BENCH_PROOFS, default 5000)
 */
import { randomUUID } from 'node:crypto';
import { EmbeddedJWK, exportJWK, generateKeyPair, jwtVerify, SignJWT } from 'jose';
import { accessTokenHash, DpopProofVerifier } from '@ofp/auth-tokens';

const PROOFS = Number(process.env.BENCH_PROOFS ?? 5_000);
const URL_ = 'https://platform.example/v2/orders';
const TOKEN = 'header.payload.signature';

async function signedProofs(count: number): Promise<string[]> {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const jwk = await exportJWK(publicKey);
  const proofs: string[] = [];
  for (let i = 0; i < count; i++) {
    proofs.push(
      await new SignJWT({
        jti: randomUUID(),
        htm: 'GET',
        htu: URL_,
        iat: Math.floor(Date.now() / 1000),
        ath: accessTokenHash(TOKEN),
      })
        .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk })
        .sign(privateKey),
    );
  }
  return proofs;
}

/** CPU microseconds of this process per item of `items` that `work` handles. */
async function cpuPerItem(
  items: readonly string[],
  work: (item: string) => Promise<unknown>,
): Promise<number> {
  const start = process.cpuUsage();
  for (const item of items) await work(item);
  const used = process.cpuUsage(start);
  return (used.user + used.system) / items.length;
}

const raw = (proof: string) => jwtVerify(proof, EmbeddedJWK, { typ: 'dpop+jwt', algorithms: ['ES256'] });
const verifier = new DpopProofVerifier(() => new Date());
const checked = (proof: string) => verifier.verify(proof, { method: 'GET', url: URL_, accessToken: TOKEN });

const [warmUp, proofs] = [await signedProofs(500), await signedProofs(PROOFS)];
await cpuPerItem(warmUp, raw);
await cpuPerItem(warmUp, checked);
const rawMicros = await cpuPerItem(proofs, raw);
const checkedMicros = await cpuPerItem(proofs, checked);
console.log(`${PROOFS} ES256 DPoP proofs, CPU of this process per proof:`);
console.log(`  raw (jose jwtVerify, embedded key): ${rawMicros.toFixed(1)} µs`);
console.log(
  `  DpopProofVerifier.verify:           ${checkedMicros.toFixed(1)} µs (${(checkedMicros / rawMicros).toFixed(2)}x raw)`,
);
