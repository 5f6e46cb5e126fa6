import { Counter, type Registry } from 'prom-client';
import { REJECTION_REASONS, type RejectionReason } from './verifier.js';

/** The grant types the token endpoint issues (API.md §7), each a series from the start. */
const GRANT_TYPES = ['authorization_code', 'refresh_token', 'client_credentials'] as const;

/**
 * The token metrics of a process (issue 15): refused bearer tokens by reason, requests over the rate
 * limit, and tokens issued by grant type. One set per registry, whichever modules of the process
 * (the auth service, the token verification of the api and the dispatcher) record into it. Every
 * known label value starts at 0, so that `increase()` sees the first event after a pod starts (a
 * series born at 1 shows no increase).
 */
export interface AuthMetrics {
  rejected(reason: RejectionReason | 'missing' | 'unavailable'): void;
  rateLimited(): void;
  issued(grantType: string): void;
  /**
   * A client failed to authenticate at an OAuth endpoint: `refused` (401) or, over the failure limits
   * (API.md §12), `limited` (429).
   */
  clientAuthenticationFailed(outcome: 'refused' | 'limited'): void;
  /** The auth service's janitor deleted `rows` expired rows of `table`. */
  purged(table: string, rows: number): void;
}

const byRegistry = new WeakMap<Registry, AuthMetrics>();

export function authMetrics(registry: Registry): AuthMetrics {
  const known = byRegistry.get(registry);
  if (known) return known;
  const rejected = new Counter({
    name: 'auth_token_verification_failures_total',
    help: 'Bearer tokens refused, by reason (missing, malformed, expired, revoked, unknown_key, unavailable...)',
    labelNames: ['reason'],
    registers: [registry],
  });
  const rateLimited = new Counter({
    name: 'rate_limited_requests_total',
    help: 'Requests refused with 429 by the per-client rate limit',
    registers: [registry],
  });
  const issued = new Counter({
    name: 'auth_tokens_issued_total',
    help: 'Access tokens issued, by grant type',
    labelNames: ['grant_type'],
    registers: [registry],
  });
  const clientAuthenticationFailures = new Counter({
    name: 'auth_client_authentication_failures_total',
    help: 'Failed client authentications at the OAuth endpoints: refused (401), or over the failure limits (429)',
    labelNames: ['outcome'],
    registers: [registry],
  });
  // Present from the start, so that an alert's increase() sees the first failure after a pod starts.
  for (const outcome of ['refused', 'limited']) clientAuthenticationFailures.inc({ outcome }, 0);
  for (const reason of [...REJECTION_REASONS, 'missing', 'unavailable']) rejected.inc({ reason }, 0);
  for (const grantType of GRANT_TYPES) issued.inc({ grant_type: grantType }, 0);
  const purged = new Counter({
    name: 'auth_purged_rows_total',
    help: "Expired rows the auth service's janitor deleted, by table (refresh_tokens, grants, authorization_codes, revoked_access_tokens, client_assertions)",
    labelNames: ['table'],
    registers: [registry],
  });
  for (const table of [
    'refresh_tokens',
    'grants',
    'authorization_codes',
    'revoked_access_tokens',
    'client_assertions',
  ])
    purged.inc({ table }, 0);
  const metrics: AuthMetrics = {
    rejected: (reason) => rejected.inc({ reason }),
    rateLimited: () => rateLimited.inc(),
    issued: (grantType) => issued.inc({ grant_type: grantType }),
    clientAuthenticationFailed: (outcome) => clientAuthenticationFailures.inc({ outcome }),
    purged: (table, rows) => purged.inc({ table }, rows),
  };
  byRegistry.set(registry, metrics);
  return metrics;
}
