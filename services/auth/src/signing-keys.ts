import { createHash, createPrivateKey, generateKeyPair, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import { createLocalJWKSet } from 'jose';
import type { Clock, KeySource } from '@ofp/auth-tokens';
import {
  inTransaction,
  prepared,
  sealedContext,
  type Pool,
  type PoolClient,
  type SealedColumn,
  type SecretsKeyring,
} from '@ofp/runtime';
import { ACCESS_TOKEN_TTL_SECONDS } from './token-lifetime.js';

const generateRsaKeyPair = promisify(generateKeyPair);

/** A published public key (RFC 7517 §4). */
export interface PublicJwk {
  kty: 'RSA';
  kid: string;
  use: 'sig';
  alg: 'RS256';
  n: string;
  e: string;
}

/**
 * A retired key stays published this long after it stopped signing: its last token's lifetime plus the
 * verifiers' clock tolerance, so that rotation never invalidates a live token (API.md §7).
 */
const PUBLISHED_AFTER_RETIREMENT_MS = (ACCESS_TOKEN_TTL_SECONDS + 5 * 60) * 1000;

/**
 * How long a replica signs with the key it last read before it reads which key signs again. A replica
 * that has not seen a rotation yet signs with the retired key for at most this long, which is harmless:
 * a retired key stays published until its last token expired (a rotation is never a revocation).
 */
const SIGNER_RECHECK_MS = 5_000;

/** The private keys are stored sealed (API.md §12: secrets at rest), for the row of their `kid`. */
export const SIGNING_KEYS_SEALED: SealedColumn = {
  table: 'auth.signing_keys',
  key: ['kid'],
  column: 'private_key',
};

/** The key that signs new tokens, as a replica keeps it in memory. */
interface Signer {
  kid: string;
  privateKey: KeyObject;
  /** When it was read (the clock's milliseconds). */
  readAt: number;
}

/**
 * The RSA keys that sign access tokens, kept in `auth.signing_keys`. One key signs at a time; rotating
 * retires it (it stays in the JWKS until its tokens have expired) and makes a new one the signer. Each
 * replica keeps the signer in memory and reads it again every {@link SIGNER_RECHECK_MS}, so that issuing
 * a token reads nothing from the database and a rotation anywhere takes effect everywhere within that.
 */
export class SigningKeys {
  private current: Signer | undefined;
  private reading: Promise<Signer> | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly clock: Clock,
    private readonly secrets: SecretsKeyring,
  ) {}

  /**
   * Creates the first key when there is none (safe to race: the loser's insert is discarded). Returns
   * whether it created one.
   */
  async ensureSigningKey(): Promise<boolean> {
    const { rows } = await this.pool.query('SELECT 1 FROM auth.signing_keys WHERE retired_at IS NULL');
    if (rows.length > 0) return false;
    const key = await newKey();
    const inserted = await this.pool.query(
      `INSERT INTO auth.signing_keys (kid, private_key, public_jwk, created_at) VALUES ($1, $2, $3, $4)
       ON CONFLICT DO NOTHING`,
      [key.jwk.kid, this.sealed(key), key.jwk, this.clock()],
    );
    return inserted.rowCount === 1;
  }

  /** Retires the signing key and makes a new one the signer (at once in this replica). Returns both key ids. */
  async rotate(): Promise<{ kid: string; retiredKid: string | undefined }> {
    const key = await newKey();
    const rotated = await inTransaction(this.pool, async (client: PoolClient) => {
      const now = this.clock();
      const retired = await client.query<{ kid: string }>(
        'UPDATE auth.signing_keys SET retired_at = $1 WHERE retired_at IS NULL RETURNING kid',
        [now],
      );
      await client.query(
        'INSERT INTO auth.signing_keys (kid, private_key, public_jwk, created_at) VALUES ($1, $2, $3, $4)',
        [key.jwk.kid, this.sealed(key), key.jwk, now],
      );
      return { kid: key.jwk.kid, retiredKid: retired.rows[0]?.kid };
    });
    this.current = {
      kid: key.jwk.kid,
      privateKey: createPrivateKey(key.privatePem),
      readAt: this.clock().getTime(),
    };
    return rotated;
  }

  /** The key that signs new tokens. */
  async signer(): Promise<{ kid: string; privateKey: KeyObject }> {
    const now = this.clock().getTime();
    const current = this.current;
    // A clock that stepped back counts as long ago.
    if (current !== undefined && now >= current.readAt && now - current.readAt < SIGNER_RECHECK_MS)
      return current;
    this.reading ??= this.readSigner(current).finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }

  private async readSigner(previous: Signer | undefined): Promise<Signer> {
    const readAt = this.clock().getTime();
    const { rows } = await this.pool.query<{ kid: string; private_key: string }>(
      prepared('SELECT kid, private_key FROM auth.signing_keys WHERE retired_at IS NULL', []),
    );
    const row = rows[0];
    if (row === undefined) throw new Error('no signing key: ensureSigningKey() runs at start');
    const privateKey =
      row.kid === previous?.kid
        ? previous.privateKey
        : createPrivateKey(
            this.secrets.open(row.private_key, sealedContext(SIGNING_KEYS_SEALED.table, [row.kid])),
          );
    this.current = { kid: row.kid, privateKey, readAt };
    return this.current;
  }

  private sealed(key: { jwk: PublicJwk; privatePem: string }): string {
    return this.secrets.seal(key.privatePem, sealedContext(SIGNING_KEYS_SEALED.table, [key.jwk.kid]));
  }

  /** The JWKS document (RFC 7517 §5): the signer and every retired key whose tokens may still be live. */
  async jwks(): Promise<{ keys: PublicJwk[] }> {
    const publishedSince = new Date(this.clock().getTime() - PUBLISHED_AFTER_RETIREMENT_MS);
    const { rows } = await this.pool.query<{ public_jwk: PublicJwk }>(
      `SELECT public_jwk FROM auth.signing_keys WHERE retired_at IS NULL OR retired_at > $1
       ORDER BY created_at DESC`,
      [publishedSince],
    );
    return { keys: rows.map((r) => r.public_jwk) };
  }

  /** The published keys as a verifier's key source, for checking this service's own tokens. */
  keySource(): KeySource {
    return async (header, token) => createLocalJWKSet(await this.jwks())(header, token);
  }
}

async function newKey(): Promise<{ jwk: PublicJwk; privatePem: string }> {
  const { publicKey, privateKey } = await generateRsaKeyPair('rsa', { modulusLength: 2048 });
  const { n, e } = publicKey.export({ format: 'jwk' });
  if (n === undefined || e === undefined) throw new Error('RSA public key without modulus or exponent');
  return {
    jwk: { kty: 'RSA', kid: thumbprint(n, e), use: 'sig', alg: 'RS256', n, e },
    privatePem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

/** RFC 7638 §3: SHA-256 over the required members in lexicographic order, base64url. */
function thumbprint(n: string, e: string): string {
  return createHash('sha256')
    .update(JSON.stringify({ e, kty: 'RSA', n }))
    .digest('base64url');
}
