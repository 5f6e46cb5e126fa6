import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import type { Events } from './models.js';

/** Any event the platform sends, discriminated by `type` (API.md §8). */
export type WebhookEvent = Events[keyof Events];

/** Request headers as a server framework hands them: fetch's `Headers`, or node's header object. */
export type IncomingHeaders = Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

export { WebhookVerificationError };

/**
 * Verifies a webhook delivery as Standard Webhooks specifies (the `standardwebhooks` library): the
 * `webhook-signature` over `webhook-id`, `webhook-timestamp` and the body exactly as it came, with the
 * endpoint's secret (`whsec_...`), and a timestamp at most 5 minutes from this machine's clock. Give
 * the body as received, before any JSON parsing: a re-serialized body no longer matches. With several
 * secrets (yours during a rotation), any one may verify. Returns the event; throws a
 * `WebhookVerificationError` when the delivery is not the platform's.
 */
export function verifyWebhook(
  body: string | Buffer,
  headers: IncomingHeaders,
  secret: string | readonly string[],
): WebhookEvent {
  const flat: Record<string, string> = {};
  const entries =
    headers instanceof Headers ? [...headers.entries()] : Object.entries(headers as Record<string, unknown>);
  for (const [name, value] of entries) {
    if (typeof value === 'string') flat[name.toLowerCase()] = value;
    else if (Array.isArray(value) && typeof value[0] === 'string') flat[name.toLowerCase()] = value[0];
  }
  const secrets = typeof secret === 'string' ? [secret] : secret;
  let failure: unknown = new WebhookVerificationError('No secret to verify with');
  for (const candidate of secrets) {
    try {
      return new Webhook(candidate).verify(body, flat) as WebhookEvent;
    } catch (error) {
      failure = error;
    }
  }
  throw failure;
}
