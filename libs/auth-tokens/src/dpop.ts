import { createHash, createHmac } from 'node:crypto';
import { calculateJwkThumbprint, EmbeddedJWK, errors, jwtVerify, type JWK } from 'jose';
import { LRUCache } from 'lru-cache';
import { epochSeconds, type Clock } from './clock.js';

/**
 * The algorithms a DPoP proof may be signed with (RFC 9449 §4.2: asymmetric only, never `none` or an
 * HMAC), advertised as the metadata's `dpop_signing_alg_values_supported` and in `algs` challenges.
 */
export const DPOP_ALGORITHMS = ['ES256', 'RS256', 'PS256', 'EdDSA'];

/**
 * How far a proof's `iat` may be from now, either way (RFC 9449 §4.3 item 11, §11.1): a proof is made
 * for one request, so a minute covers the request's time on the wire and the hosts' clock skew.
 */
export const DPOP_PROOF_WINDOW_SECONDS = 60;

/**
 * How many proofs a process remembers to refuse their replay (RFC 9449 §11.1), the least recently seen
 * forgotten first. A proof is remembered only while its `iat` is in the window, so this bounds memory at
 * a rate of about 800 proofs a second per process before a replay could go unnoticed.
 */
const REMEMBERED_PROOFS = 100_000;

/**
 * A DPoP proof that is not acceptable; `description` is safe to send back in a challenge. `code` is
 * `use_dpop_nonce` when it lacks the server's current nonce (RFC 9449 §8, §9), which `nonce` then is:
 * the client is to send the request again with it.
 */
export class DpopProofError extends Error {
  override readonly name = 'DpopProofError';
  constructor(
    readonly description: string,
    readonly code: 'invalid_dpop_proof' | 'use_dpop_nonce' = 'invalid_dpop_proof',
    readonly nonce?: string,
  ) {
    super(description);
  }
}

/**
 * Server-provided nonces (RFC 9449 §8-9): the HMAC of the current window of
 * {@link DPOP_PROOF_WINDOW_SECONDS} under a secret, so a client cannot make proofs for later, and any
 * process with the same secret accepts another's nonce (a client keeps one nonce per origin, and behind
 * the ingress every service has the same origin). A nonce is accepted in its window and the next.
 */
class DpopNonces {
  constructor(
    private readonly secret: string,
    private readonly clock: Clock,
  ) {}

  /** The nonce to hand out now (`DPoP-Nonce`). */
  current(): string {
    return this.nonceOf(this.window());
  }

  isFresh(nonce: unknown): boolean {
    const window = this.window();
    return nonce === this.nonceOf(window) || nonce === this.nonceOf(window - 1);
  }

  private window(): number {
    return Math.floor(epochSeconds(this.clock()) / DPOP_PROOF_WINDOW_SECONDS);
  }

  private nonceOf(window: number): string {
    return createHmac('sha256', this.secret).update(`dpop-nonce ${window}`).digest('base64url');
  }
}

/** The request a proof must be for (RFC 9449 §4.3 items 8-9, 12). */
export interface DpopRequest {
  /** `htm`: the request's method. */
  method: string;
  /** `htu`: the URL the client sent the request to, as it sees it (without query or fragment). */
  url: string;
  /** The access token sent with the request, whose hash the proof's `ath` must be (RFC 9449 §4.3 item 12). */
  accessToken?: string;
}

/** What a verified proof tells: the thumbprint of its key (RFC 7638, SHA-256), the `cnf.jkt` of a bound token. */
export interface DpopProof {
  jkt: string;
}

/** `ath` (RFC 9449 §4.2): the base64url SHA-256 of the access token. */
export function accessTokenHash(accessToken: string): string {
  return createHash('sha256').update(accessToken).digest('base64url');
}

/** A URL as `htu` compares it (RFC 9449 §4.3 item 9): scheme, host, port and path; no query or fragment. */
function withoutQuery(url: string): string | undefined {
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname}`;
  } catch {
    return undefined;
  }
}

/**
 * Verifies DPoP proofs (RFC 9449 §4.3) with jose: one `DPoP` header, a JWT of `typ: dpop+jwt` signed
 * with an asymmetric algorithm by the public key in its `jwk` header, with `jti`, `htm` and `htu` of
 * this request, `iat` within {@link DPOP_PROOF_WINDOW_SECONDS} of now, `ath` the hash of the access token
 * it comes with (and none without one), and a `jti` this process has not seen inside the window.
 *
 * The replay check is this process's memory: a proof replayed to another replica within the window is
 * not caught there (docs/auth.md).
 */
export class DpopProofVerifier {
  /** Seen proofs, by key thumbprint and `jti`, with the epoch second until which a replay would be accepted. */
  private readonly seen = new LRUCache<string, number>({ max: REMEMBERED_PROOFS });

  private readonly nonces: DpopNonces | undefined;

  /**
   * With `nonceSecret` (`DPOP_NONCE_SECRET`, the same in every process), every proof must carry a
   * current server nonce (RFC 9449 §8-9).
   */
  constructor(
    private readonly clock: Clock,
    nonceSecret?: string,
  ) {
    this.nonces = nonceSecret === undefined ? undefined : new DpopNonces(nonceSecret, clock);
  }

  /** The nonce responses to DPoP requests carry (`DPoP-Nonce`), when nonces are required. */
  nonce(): string | undefined {
    return this.nonces?.current();
  }

  /** Verifies the proof of `header` (the request's `DPoP` header values) for `request`. */
  async verify(header: string | string[] | undefined, request: DpopRequest): Promise<DpopProof> {
    const proof = Array.isArray(header) ? (header.length === 1 ? header[0] : undefined) : header;
    // Node.js joins repeated headers with a comma, which no JWT holds.
    if (proof === undefined || proof.includes(','))
      throw new DpopProofError('Exactly one DPoP proof header is required');
    const now = this.clock();
    let payload: Record<string, unknown>;
    let jwk: JWK;
    try {
      const verified = await jwtVerify(proof, EmbeddedJWK, {
        typ: 'dpop+jwt',
        algorithms: DPOP_ALGORITHMS,
        requiredClaims: ['jti', 'htm', 'htu', 'iat'],
        currentDate: now,
      });
      payload = verified.payload;
      jwk = verified.protectedHeader.jwk!;
    } catch (error) {
      throw new DpopProofError(`The DPoP proof is invalid: ${proofProblem(error)}`);
    }
    const { jti, htm, htu, iat, ath } = payload;
    if (typeof jti !== 'string' || jti === '' || jti.length > 200)
      throw new DpopProofError('The DPoP proof jti is missing or malformed');
    if (htm !== request.method) throw new DpopProofError('The DPoP proof is not for this method (htm)');
    if (typeof htu !== 'string' || withoutQuery(htu) !== withoutQuery(request.url))
      throw new DpopProofError('The DPoP proof is not for this URL (htu)');
    const nowSeconds = epochSeconds(now);
    if (typeof iat !== 'number' || Math.abs(nowSeconds - iat) > DPOP_PROOF_WINDOW_SECONDS)
      throw new DpopProofError(
        `The DPoP proof iat is more than ${DPOP_PROOF_WINDOW_SECONDS} s from the server time`,
      );
    if (request.accessToken === undefined) {
      if (ath !== undefined)
        throw new DpopProofError('The DPoP proof has an ath but no access token came with it');
    } else if (ath === undefined) {
      throw new DpopProofError('The DPoP proof has no ath (the access token hash)');
    } else if (ath !== accessTokenHash(request.accessToken)) {
      throw new DpopProofError('The DPoP proof ath is not the hash of this access token');
    }
    if (this.nonces !== undefined && !this.nonces.isFresh(payload.nonce)) {
      throw new DpopProofError(
        payload.nonce === undefined
          ? 'The DPoP proof must carry the server nonce (DPoP-Nonce)'
          : 'The DPoP proof nonce is not current: use the DPoP-Nonce of this response',
        'use_dpop_nonce',
        this.nonces.current(),
      );
    }
    const jkt = await calculateJwkThumbprint(jwk, 'sha256');
    const key = `${jkt} ${jti}`;
    const until = this.seen.get(key);
    if (until !== undefined && until >= nowSeconds)
      throw new DpopProofError('The DPoP proof was used before (jti)');
    this.seen.set(key, iat + DPOP_PROOF_WINDOW_SECONDS);
    return { jkt };
  }
}

/** Why jose refused a proof, in words safe to send back. */
function proofProblem(error: unknown): string {
  if (error instanceof errors.JWTClaimValidationFailed) {
    return error.claim === 'typ' ? 'typ must be dpop+jwt' : `${error.claim} (${error.reason})`;
  }
  if (error instanceof errors.JWTExpired) return 'expired';
  if (error instanceof errors.JOSEAlgNotAllowed) return `alg must be one of ${DPOP_ALGORITHMS.join(' ')}`;
  if (error instanceof errors.JWSSignatureVerificationFailed) return 'signature';
  if (error instanceof errors.JWSInvalid && /jwk|JWK/.test(error.message))
    return 'its jwk header must be a public signing key';
  return 'malformed';
}
