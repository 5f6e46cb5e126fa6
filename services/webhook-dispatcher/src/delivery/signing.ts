import { createHmac, randomBytes } from 'node:crypto';

// Standard Webhooks signatures (https://www.standardwebhooks.com, "Signature scheme"; API.md §8): the
// secret is `whsec_` + the base64 of the key, and each signature is `v1,` + the base64 of the
// HMAC-SHA256 of `{id}.{timestamp}.{body}` under the decoded key.

const SECRET_PREFIX = 'whsec_';
/** API.md §8: 32 random bytes. */
const SECRET_BYTES = 32;

/** A new endpoint secret, `whsec_` + base64 of 32 random bytes. */
export function generateSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/** `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">` under `secret`'s key. */
export function sign(secret: string, id: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(
    secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret,
    'base64',
  );
  const digest = createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64');
  return `v1,${digest}`;
}

/**
 * The three Standard Webhooks headers of a delivery. `secrets` are the endpoint's current secret and,
 * during a rotation, the previous one: each gives one signature, space-separated, so a subscriber that
 * knows either secret accepts the message.
 */
export function signatureHeaders(
  secrets: readonly string[],
  id: string,
  at: Date,
  body: string,
): Record<'webhook-id' | 'webhook-timestamp' | 'webhook-signature', string> {
  const timestamp = Math.floor(at.getTime() / 1000);
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': secrets.map((secret) => sign(secret, id, timestamp, body)).join(' '),
  };
}
