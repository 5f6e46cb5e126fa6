import { fileURLToPath } from 'node:url';
import { randomUUID } from 'node:crypto';
import type { EventStore } from '@ofp/event-store';
import {
  GRANT_REVOKED,
  REVOCATIONS_STREAM_TYPE,
  announcementOf,
  BearerGate,
  createTokenVerifier,
  DpopProofVerifier,
  issuerFromPublicUrl,
  TokenBucketLimiter,
  type AuthMetrics,
  type Clock,
  type TokenBucketConfig,
} from '@ofp/auth-tokens';
import {
  checkSealedColumn,
  declareSealedColumns,
  migrate,
  resealColumn,
  type Logger,
  type Module,
  type Pool,
  type SecretsKeyring,
} from '@ofp/runtime';
import { PUBLIC, bindRoutes, type Route, type RouteSpec } from '@ofp/http-api';
import { adminAccess } from './admin/admin-token.js';
import { adminOperations, adminRouteSpecs } from './admin/routes.js';
import { Janitor } from './janitor.js';
import { FailedAuthenticationLimits } from './oauth/failed-authentication.js';
import { Grants } from './oauth/grants.js';
import { clientAccess } from './oauth/client-auth.js';
import { tokenEndpoint } from './oauth/metadata.js';
import { authOperations, authRouteSpecs } from './routes.js';
import { SIGNING_KEYS_SEALED, SigningKeys } from './signing-keys.js';

export interface AuthSettings {
  /** The deployment's public base URL: the issuer (`iss`, RFC 8414 `issuer`). */
  publicUrl: string;
  /** Guards `/admin` (API.md §10). */
  adminToken: string;
  /** Per-client rate limit of the client-authenticated OAuth endpoints. */
  rateLimit: TokenBucketConfig;
  /** Failed client authentications allowed per source address and per client_id (API.md §12). */
  failedAuthentication: TokenBucketConfig;
  refreshTokenTtlSeconds: number;
  /** When set, DPoP proofs must carry a server nonce made with it (RFC 9449 §8-9). */
  dpopNonceSecret?: string;
}

export interface AuthModuleDeps {
  /** A pool on a database migrated with {@link migrateAuth}. */
  pool: Pool;
  /** Where revocations are announced (the event store on the same database). */
  store: EventStore;
  logger: Logger;
  clock: Clock;
  settings: AuthSettings;
  /** The key-encryption keys of the secrets at rest (API.md §12). */
  secrets: SecretsKeyring;
  /** Token metrics of the process (issuance, refusals, rate limiting); none in tests. */
  metrics?: AuthMetrics;
}

/** The auth service: its module and its parts of the route table. */
export interface AuthService {
  /** The issuer identifier verifiers must expect. */
  readonly issuer: string;
  /** Makes sure a signing key exists. */
  readonly module: Module;
  /** `auth-janitor`: purges expired codes, grants and refresh tokens (tests run `purge` by hand). */
  readonly janitor: Janitor;
  /** `/oauth/*`, `/.well-known/*` and `/v2/authenticate`. */
  readonly routes: readonly Route[];
  /** `/admin/*` (API.md §10): the operators' API, for a port of its own where the deployment has one. */
  readonly adminRoutes: readonly Route[];
}

/** The auth service's migrations (plain SQL, applied by `@ofp/runtime`'s `migrate`). */
export const AUTH_MIGRATIONS_DIRECTORY = fileURLToPath(new URL('../migrations', import.meta.url));

/** Creates or updates schema `auth`. Run before the modules of {@link createAuthService} start. */
export function migrateAuth(pool: Pool, logger: Logger): Promise<void> {
  return migrate(pool, { component: 'auth', directory: AUTH_MIGRATIONS_DIRECTORY, logger });
}

/**
 * The auth service's public routes as data (the OAuth endpoints, metadata and `/v2/authenticate`)
 * for the deployment whose public base URL is `publicUrl`; the admin API's are {@link adminRouteSpecs}.
 */
export function authServiceRouteSpecs(publicUrl: string): RouteSpec[] {
  return authRouteSpecs(issuerFromPublicUrl(publicUrl));
}

/**
 * The auth service (API.md §7 and §10): OAuth 2.0 authorization server, JWKS, admin API. Its module
 * makes sure a signing key exists, so it starts before the routes are served.
 */
export function createAuthService(deps: AuthModuleDeps): AuthService {
  const issuer = issuerFromPublicUrl(deps.settings.publicUrl);
  const keys = new SigningKeys(deps.pool, deps.clock, deps.secrets);
  const grants = new Grants({
    keys,
    // One stream per announcement: the revocation and its event commit in the revoking transaction.
    announce: async (tx, revocation) => {
      await deps.store.appendNewStreamIn(tx, {
        streamId: `${REVOCATIONS_STREAM_TYPE}-${randomUUID()}`,
        streamType: REVOCATIONS_STREAM_TYPE,
        expectedVersion: 0,
        orgId: null,
        events: [{ eventId: randomUUID(), type: GRANT_REVOKED, data: announcementOf(revocation) }],
      });
    },
    issuer,
    clock: deps.clock,
    refreshTokenTtlSeconds: deps.settings.refreshTokenTtlSeconds,
  });
  // Revocation and introspection check grants in the database, so this verifier needs no deny-list.
  const verifier = createTokenVerifier({
    issuer,
    keys: keys.keySource(),
    denyList: { isDenied: () => false },
    clock: deps.clock,
  });
  const limiter = new TokenBucketLimiter(deps.settings.rateLimit, deps.clock);
  // One memory of DPoP proofs seen, for the token endpoint and /v2/authenticate alike.
  const dpop = new DpopProofVerifier(deps.clock, deps.settings.dpopNonceSecret);
  const janitor = new Janitor({
    pool: deps.pool,
    clock: deps.clock,
    logger: deps.logger,
    ...(deps.metrics ? { metrics: deps.metrics } : {}),
  });
  // Who may call: the OAuth endpoints' clients (their rate limit and failure limits, API.md §12), and
  // `/v2/authenticate`'s bearer tokens (this service's verifier and the rate limit).
  const client = clientAccess(
    deps.pool,
    limiter,
    new FailedAuthenticationLimits(deps.settings.failedAuthentication, deps.clock, deps.metrics),
    { audiences: [issuer, tokenEndpoint(issuer)], clock: deps.clock },
    deps.metrics,
  );
  const gate = new BearerGate(verifier, limiter, deps.metrics, {
    publicUrl: deps.settings.publicUrl,
    proofs: dpop,
  });
  let started = false;

  return {
    issuer,
    janitor,
    module: {
      name: 'auth',
      async start() {
        // A wrong key stops the start with one line; signing keys stored in clear (before secrets were
        // sealed) or under a key being rotated out are sealed under the current key.
        await declareSealedColumns(deps.pool, [SIGNING_KEYS_SEALED]);
        await checkSealedColumn(deps.pool, deps.secrets, SIGNING_KEYS_SEALED);
        const { resealed, unopened } = await resealColumn(deps.pool, deps.secrets, SIGNING_KEYS_SEALED);
        if (resealed > 0)
          deps.logger.info(
            { resealed },
            `sealed ${resealed} signing keys under key ${deps.secrets.currentId}`,
          );
        for (const secret of unopened)
          deps.logger.error(secret, `a stored signing key does not open: ${secret.row}: ${secret.reason}`);
        if (await keys.ensureSigningKey()) deps.logger.info('created the first signing key');
        started = true;
      },
      stop() {
        started = false;
        return Promise.resolve();
      },
      ready: () => started,
    },
    routes: bindRoutes(
      authRouteSpecs(issuer),
      authOperations({
        pool: deps.pool,
        clock: deps.clock,
        issuer,
        keys,
        grants,
        dpop,
        verifier,
        ...(deps.metrics ? { metrics: deps.metrics } : {}),
      }),
      (access) =>
        access.kind === 'client'
          ? client
          : access.kind === 'bearer'
            ? gate.access(access.scopes ?? [])
            : PUBLIC,
    ),
    adminRoutes: bindRoutes(
      adminRouteSpecs(),
      adminOperations({ pool: deps.pool, clock: deps.clock, keys, grants }),
      () => adminAccess(deps.settings.adminToken),
    ),
  };
}
