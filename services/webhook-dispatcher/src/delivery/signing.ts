import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

// Standard Webhooks signatures (https://www.standardwebhooks.com, "Signature scheme"; API.md §8), made
// by the reference library, `standardwebhooks`: the secret is `whsec_` + the base64 of the key, and
// each signature is `v1,` + the base64 of the HMAC-SHA256 of `{id}.{timestamp}.{body}` under it.

const SECRET_PREFIX = 'whsec_';
/** API.md §8: 32 random bytes. */
const SECRET_BYTES = 32;
/** Endpoints whose decoded keys are kept; beyond it, the least recently added is dropped. */
const KEPT_SIGNERS = 1_000;

/** A new endpoint secret, `whsec_` + base64 of 32 random bytes. */
export function generateSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/** The three Standard Webhooks headers of a delivery. */
export type SignatureHeaders = Record<'webhook-id' | 'webhook-timestamp' | 'webhook-signature', string>;

/**
 * Signs deliveries with the `standardwebhooks` library, keeping each secret's decoded key (a
 * `Webhook`) for the deliveries that follow.
 */
export class DeliverySigner {
  private readonly signers = new Map<string, Webhook>();

  /**
   * The headers of a delivery. `secrets` are the endpoint's current secret and, during a rotation,
   * the previous one: each gives one signature, space-separated, so a subscriber that knows either
   * secret accepts the message.
   */
  headers(secrets: readonly string[], id: string, at: Date, body: string): SignatureHeaders {
    return {
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': secrets.map((secret) => this.signer(secret).sign(id, at, body)).join(' '),
    };
  }

  private signer(secret: string): Webhook {
    let signer = this.signers.get(secret);
    if (!signer) {
      signer = new Webhook(secret);
      if (this.signers.size >= KEPT_SIGNERS) this.signers.delete(this.signers.keys().next().value!);
      this.signers.set(secret, signer);
    }
    return signer;
  }
}
