import { createHmac, createSecretKey, randomBytes, type KeyObject } from 'node:crypto';

// Standard Webhooks signatures (https://www.standardwebhooks.com, "Signature scheme"; API.md §8): the
// secret is `whsec_` + the base64 of the key, and each signature is `v1,` + the base64 of the
// HMAC-SHA256 of `{id}.{timestamp}.{body}` under it. Made with node:crypto: the reference library,
// `standardwebhooks`, hashes in JavaScript (fast-sha256), 11 µs of the dispatcher's CPU per delivery
// in `npm run bench:webhooks` against about 2 here. Its verifier checks these signatures in the tests
// (signing.test.ts, the test receiver of @ofp/testing) and in @ofp/client.

const SECRET_PREFIX = 'whsec_';
/** API.md §8: 32 random bytes. */
const SECRET_BYTES = 32;
/** Endpoints whose decoded keys are kept; beyond it, the least recently added is dropped. */
const KEPT_KEYS = 1_000;

/** A new endpoint secret, `whsec_` + base64 of 32 random bytes. */
export function generateSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/** The three Standard Webhooks headers of a delivery. */
export type SignatureHeaders = Record<'webhook-id' | 'webhook-timestamp' | 'webhook-signature', string>;

/** Signs deliveries, keeping each secret's decoded key for the deliveries that follow. */
export class DeliverySigner {
  private readonly keys = new Map<string, KeyObject>();

  /**
   * The headers of a delivery. `secrets` are the endpoint's current secret and, during a rotation,
   * the previous one: each gives one signature, space-separated, so a subscriber that knows either
   * secret accepts the message.
   */
  headers(secrets: readonly string[], id: string, at: Date, body: string): SignatureHeaders {
    const timestamp = String(Math.floor(at.getTime() / 1000));
    const signed = `${id}.${timestamp}.${body}`;
    return {
      'webhook-id': id,
      'webhook-timestamp': timestamp,
      'webhook-signature': secrets
        .map((secret) => `v1,${createHmac('sha256', this.key(secret)).update(signed).digest('base64')}`)
        .join(' '),
    };
  }

  private key(secret: string): KeyObject {
    let key = this.keys.get(secret);
    if (!key) {
      // Secrets are made by generateSecret; one without its prefix is taken as the base64 alone, as
      // the reference library does.
      const base64 = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
      key = createSecretKey(Buffer.from(base64, 'base64'));
      if (this.keys.size >= KEPT_KEYS) this.keys.delete(this.keys.keys().next().value!);
      this.keys.set(secret, key);
    }
    return key;
  }
}
