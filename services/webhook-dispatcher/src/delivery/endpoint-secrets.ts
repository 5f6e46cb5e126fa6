import { SecretsKeyError, type SecretsKeyring } from '@ofp/runtime';
import { endpointSecretContext } from '../schema.js';

/** Endpoints' stored secrets kept opened; beyond it, the least recently added is dropped. */
const KEPT_SECRETS = 1_000;

/** An endpoint's stored secret that did not open, and why (never what it holds). */
export interface UnopenedSecret {
  readonly unopened: string;
}

/** An endpoint's stored secrets, and what they opened to. */
interface Opened {
  readonly secret: string;
  readonly previous: string | null;
  readonly secrets: readonly string[];
}

/**
 * Opens the endpoints' sealed signing secrets (API.md §12) of claimed deliveries, keeping what each
 * opened to: opening is two AES-GCM decryptions and a parse, about a tenth of the dispatcher's CPU per
 * delivery when done for every delivery claimed (the signer keeps the opened secrets already). Each
 * endpoint keeps its stored values with what they opened to, so a new or rotated secret (another sealed
 * text) is opened anew; all are forgotten when the keys change (SECRETS_KEY_FILE read again), so that
 * a key taken away stops opening what it sealed, as before.
 */
export class EndpointSecrets {
  private readonly opened = new Map<number, Opened>();
  private keys: SecretsKeyring['keys'];

  constructor(private readonly keyring: SecretsKeyring) {
    this.keys = keyring.keys;
  }

  /**
   * The current secret, then the previous one when given (in its grace period); or why they do not
   * open: that endpoint's deliveries fail alone, not the claim.
   */
  open(webhookId: number, secret: string, previous: string | null): readonly string[] | UnopenedSecret {
    if (this.keyring.keys !== this.keys) {
      this.opened.clear();
      this.keys = this.keyring.keys;
    }
    // Compared, not joined into a key: a claim asks once per delivery.
    const kept = this.opened.get(webhookId);
    if (kept !== undefined && kept.secret === secret && kept.previous === previous) return kept.secrets;
    const context = endpointSecretContext(webhookId);
    let secrets: readonly string[];
    try {
      secrets = [secret, previous]
        .filter((sealed) => sealed !== null)
        .map((sealed) => this.keyring.open(sealed, context));
    } catch (error) {
      if (!(error instanceof SecretsKeyError)) throw error;
      return { unopened: error.message };
    }
    this.opened.delete(webhookId);
    if (this.opened.size >= KEPT_SECRETS) this.opened.delete(this.opened.keys().next().value!);
    this.opened.set(webhookId, { secret, previous, secrets });
    return secrets;
  }
}
