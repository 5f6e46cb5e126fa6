import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * A new secret of 256 random bits, base64url (client secrets, authorization codes, refresh tokens).
 * RFC 6749 §10.10: guessing one must be infeasible.
 */
export function newSecret(): string {
  return randomBytes(32).toString('base64url');
}

/**
 * The stored form of a secret: its SHA-256 digest. A slow password hash (scrypt, argon2) protects
 * low-entropy human passwords against offline guessing; these secrets carry 256 random bits, so a fast
 * digest is just as irreversible, lets a secret be looked up by its digest, and keeps the token endpoint
 * from becoming a CPU sink under a flood of requests.
 */
export function digestSecret(secret: string): Buffer {
  return createHash('sha256').update(secret, 'utf8').digest();
}

/** Compares a presented secret with a stored digest in constant time. */
export function secretMatches(presented: string, digest: Buffer): boolean {
  const candidate = digestSecret(presented);
  return candidate.length === digest.length && timingSafeEqual(candidate, digest);
}
