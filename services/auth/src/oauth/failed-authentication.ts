import { isIPv6 } from 'node:net';
import { LRUCache } from 'lru-cache';
import { baseError, type DomainError } from '@ofp/contracts';
import {
  TokenBucketLimiter,
  type AuthMetrics,
  type BucketDecision,
  type Clock,
  type TokenBucketConfig,
} from '@ofp/auth-tokens';

/** How many (client, address) pairs that authenticated lately are remembered. */
const FAMILIAR_PAIRS_KEPT = 100_000;
/** How long a pair stays familiar after its last successful authentication. */
const FAMILIAR_FOR_MS = 24 * 3600_000;

/**
 * Limits on failed client authentication at the OAuth endpoints (API.md §12): a token bucket of
 * failures per source address and one per `client_id`, refilled as configured. A failure over either
 * limit is answered 429 instead of 401, with `Retry-After` and the `RateLimit-*` headers of the limit
 * that refused it (API.md §3, as the OpenAPI document publishes for the OAuth endpoints' 429).
 *
 * The real client's correct secret is never locked out, which is how these limits differ from a lockout:
 *
 * - An address over its limit gets 429 before its credentials are checked, which is what throttles
 *   guessing, except for the (client, address) pairs that authenticated successfully in the last 24 h:
 *   a client behind the same NAT as a misbehaving one keeps getting in (Azure AD's "smart lockout"
 *   tells familiar from unfamiliar locations the same way).
 * - A `client_id` over its limit, which anyone can cause from anywhere, has its credentials still
 *   checked: the correct secret is admitted, a wrong one gets 429. Guessing a 256-bit secret is
 *   infeasible anyway; what this limit adds is that an attack on one client is visible (metric,
 *   alert) and costs the attacker each address's budget.
 *
 * Memory follows the number of recently failing keys (full buckets are forgotten) and the familiar
 * pairs (at most {@link FAMILIAR_PAIRS_KEPT}). Each process counts its own: with N replicas behind a
 * balancer, a key gets up to N times the budget.
 */
export class FailedAuthenticationLimits {
  private readonly byAddress: TokenBucketLimiter;
  private readonly byClient: TokenBucketLimiter;
  private readonly familiar = new LRUCache<string, true>({ max: FAMILIAR_PAIRS_KEPT, ttl: FAMILIAR_FOR_MS });

  constructor(
    private readonly config: TokenBucketConfig,
    clock: Clock,
    private readonly metrics?: AuthMetrics,
  ) {
    this.byAddress = new TokenBucketLimiter(config, clock);
    this.byClient = new TokenBucketLimiter(config, clock);
  }

  /** Throws the 429 to answer before the credentials are checked, when their address is over its limit. */
  admit(clientId: string | undefined, address: string | undefined): void {
    const source = addressKey(address);
    const decision = this.byAddress.peek(source);
    if (decision.allowed || (clientId !== undefined && this.familiar.has(pair(clientId, source)))) return;
    this.metrics?.clientAuthenticationFailed('limited');
    throw tooManyFailures(decision, this.config);
  }

  /** Records a successful authentication: this client is familiar at this address. */
  succeeded(clientId: string, address: string | undefined): void {
    this.familiar.set(pair(clientId, addressKey(address)), true);
  }

  /**
   * Counts a failed authentication; returns the error to answer: `refused` (the 401) while within the
   * limits, a 429 once over either.
   */
  failed<E>(refused: E, clientId: string | undefined, address: string | undefined): E | DomainError {
    const byAddress = this.byAddress.take(addressKey(address));
    const byClient = clientId === undefined ? undefined : this.byClient.take(clientId);
    if (byAddress.allowed && (byClient === undefined || byClient.allowed)) {
      this.metrics?.clientAuthenticationFailed('refused');
      return refused;
    }
    this.metrics?.clientAuthenticationFailed('limited');
    const refusing =
      byClient === undefined || byAddress.retryAfterSeconds >= byClient.retryAfterSeconds
        ? byAddress
        : byClient;
    return tooManyFailures(refusing, this.config);
  }
}

/** The 429 of a limit's refusing `decision`, with its `RateLimit-*` headers and `Retry-After`. */
function tooManyFailures(decision: BucketDecision, config: TokenBucketConfig): DomainError {
  return baseError('RateLimited', 'Too many failed client authentications; try again later', {
    'RateLimit-Limit': String(config.capacity),
    'RateLimit-Remaining': String(decision.remaining),
    'RateLimit-Reset': String(decision.resetSeconds),
    'Retry-After': String(Math.max(1, decision.retryAfterSeconds)),
  });
}

function pair(clientId: string, address: string): string {
  return `${clientId}\n${address}`;
}

/**
 * The key an address is counted under: an IPv4 address itself, an IPv6 address by its /64 (a single
 * host commonly holds a whole /64, RFC 7421, so counting its addresses apart would let it rotate
 * through them). An unknown address (the connection already gone) counts under one key.
 */
export function addressKey(address: string | undefined): string {
  if (address === undefined) return 'unknown';
  if (!isIPv6(address)) return address;
  const [head = '', tail] = address.split('::');
  const groups = head === '' ? [] : head.split(':');
  if (tail !== undefined) {
    const rest = tail === '' ? [] : tail.split(':');
    groups.push(...Array<string>(Math.max(0, 8 - groups.length - rest.length)).fill('0'), ...rest);
  }
  return `${groups
    .slice(0, 4)
    .map((group) => parseInt(group, 16).toString(16))
    .join(':')}::/64`;
}
