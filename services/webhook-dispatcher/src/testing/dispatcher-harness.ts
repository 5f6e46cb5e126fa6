import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import {
  BearerGate,
  TokenBucketLimiter,
  TokenRejectedError,
  isScope,
  type TokenVerifier,
} from '@ofp/auth-tokens';
import { PgLogBus, type Bus } from '@ofp/bus';
import type { RecordChange, RecordJson } from '@ofp/contracts';
import { EventStore, migrateEventStore, type StoredEvent } from '@ofp/event-store';
import { ModuleRunner, createMetricsRegistry, loadSecretsKeyring, type SecretsKeyring } from '@ofp/runtime';
import { closeServer, createHttpApp, listen } from '@ofp/http-api';
import { createTestDatabase, testLogger, testSecretsKeyFile, type TestDatabase } from '@ofp/testing';
import {
  createWebhookDispatcher,
  migrateWebhookDispatcher,
  type WebhookDispatcherDependencies,
  type WebhookDispatcherService,
} from '../module.js';

/** A response of the dispatcher's HTTP API, its body parsed. */
export interface ApiResponse {
  readonly status: number;
  readonly headers: Headers;
  readonly body: {
    count: number;
    results: unknown;
    errors: Record<string, string[]> | null;
    total_results?: number;
  };
}

export interface HarnessOptions extends Partial<
  Pick<
    WebhookDispatcherDependencies,
    'allowPrivateTargets' | 'allowedNetworks' | 'limits' | 'random' | 'resolveHost' | 'clock'
  >
> {
  /** The bus the module consumes; the Postgres-log bus over the harness's database when left out. */
  readonly bus?: (database: TestDatabase, store: EventStore) => Bus;
  /** Whether the event store keeps outbox rows (for a Kafka relay). */
  readonly outbox?: boolean;
  /** Whether to start the module (its intake and workers); the routes are served either way. */
  readonly start?: boolean;
}

/**
 * The dispatcher module on a database of its own, served over real HTTP on loopback, with bearer
 * tokens of the form `test.<org>.<scope~scope>` standing in for the auth service's JWTs.
 */
export interface DispatcherHarness {
  readonly database: TestDatabase;
  readonly store: EventStore;
  readonly dispatcher: WebhookDispatcherService;
  /** The key-encryption keys that seal its secrets: the machine's test key file, as the dispatcher processes of the tests use. */
  readonly secrets: SecretsKeyring;
  /** Base URL of the `/v2` routes. */
  readonly url: string;
  /** Calls the API as organization `orgId` with `scopes` (read and write unless told otherwise). */
  request(
    method: string,
    path: string,
    options?: { orgId?: number; scopes?: string[]; body?: unknown; headers?: Record<string, string> },
  ): Promise<ApiResponse>;
  /** Creates a webhook for `orgId`; resolves with its record and secret. */
  createWebhook(
    orgId: number,
    fields: Record<string, unknown>,
  ): Promise<{ id: number; secret: string; record: RecordJson }>;
  /** Appends a record event (`person.updated` of `people-<id>` at `version`), as the api would. */
  appendRecordEvent(input: {
    orgId: number;
    model?: string;
    singular?: string;
    id: number;
    version: number;
    change?: 'created' | 'updated' | 'deleted';
    fields?: Record<string, unknown>;
    previous?: Record<string, unknown>;
  }): Promise<StoredEvent>;
  close(): Promise<void>;
}

/** Test bearer tokens, `test.<org>.<scope~scope>`, in the place of the auth service's JWTs. */
const testTokens: TokenVerifier = {
  verify(token) {
    const match = /^test\.(\d+)\.([a-z~]*)$/.exec(token);
    if (!match) return Promise.reject(new TokenRejectedError('The access token is malformed', 'malformed'));
    return Promise.resolve({
      clientId: `client-${match[1]}`,
      orgId: Number(match[1]),
      scopes: match[2]!.split('~').filter(isScope),
      grantId: 'grant',
      tokenId: randomUUID(),
      issuedAt: new Date(),
      expiresAt: new Date(Date.now() + 3_600_000),
    });
  },
};

export async function startDispatcherHarness(options: HarnessOptions = {}): Promise<DispatcherHarness> {
  const logger = testLogger('webhook-dispatcher');
  const database = await createTestDatabase();
  await migrateEventStore(database.pool, logger);
  await migrateWebhookDispatcher(database.pool, logger);
  const store = new EventStore(database.pool, { outbox: options.outbox ?? false });
  const bus =
    options.bus?.(database, store) ??
    new PgLogBus(database.pool, database.session, store, logger, { batchSize: 500, pollIntervalMs: 50 });
  const secrets = await loadSecretsKeyring(testSecretsKeyFile());
  const dispatcher = createWebhookDispatcher({
    secrets,
    pool: database.pool,
    session: database.session,
    store,
    bus,
    logger,
    clock: options.clock ?? (() => new Date()),
    gate: new BearerGate(
      testTokens,
      new TokenBucketLimiter({ capacity: 1e9, refillPerSecond: 1e9 }, () => new Date()),
    ),
    publicUrl: 'https://ofp.example.test',
    allowPrivateTargets: options.allowPrivateTargets ?? true,
    ...(options.allowedNetworks ? { allowedNetworks: options.allowedNetworks } : {}),
    limits: { pollIntervalMs: 20, ...options.limits },
    ...(options.random ? { random: options.random } : {}),
    ...(options.resolveHost ? { resolveHost: options.resolveHost } : {}),
  });
  const modules = new ModuleRunner([dispatcher.delivery, dispatcher.intake], logger);
  const app = createHttpApp({
    logger,
    metrics: createMetricsRegistry('webhook-dispatcher-test'),
    ready: () => modules.ready(),
    routes: dispatcher.routes,
  });
  const server: Server = (await listen(app, 0, '127.0.0.1')).server;
  const address = server.address();
  const url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}/v2`;
  if (options.start !== false) await modules.start();

  const harness: DispatcherHarness = {
    database,
    secrets,
    store,
    dispatcher,
    url,
    async request(method, path, { orgId = 1, scopes = ['read', 'write'], body, headers = {} } = {}) {
      const response = await fetch(`${url}${path}`, {
        method,
        headers: {
          authorization: `Bearer test.${orgId}.${scopes.join('~')}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return {
        status: response.status,
        headers: response.headers,
        body: (await response.json()) as ApiResponse['body'],
      };
    },
    async createWebhook(orgId, fields) {
      const response = await harness.request('POST', '/webhooks', { orgId, body: fields });
      if (response.status !== 201)
        throw new Error(`create webhook: ${response.status} ${JSON.stringify(response.body)}`);
      const { secret, ...record } = response.body.results as RecordJson & { secret: string };
      return { id: record.id, secret, record };
    },
    async appendRecordEvent({
      orgId,
      model = 'people',
      singular = 'person',
      id,
      version,
      change = version === 1 ? 'created' : 'updated',
      fields = {},
      previous = {},
    }) {
      const at = new Date().toISOString();
      const data: RecordChange = {
        record: { id, last_name: `Name ${id}`, ...fields, created_at: at, updated_at: at, version },
        previous,
        deleted: change === 'deleted',
      };
      const eventId = randomUUID();
      await store.append({
        streamId: `${model}-${id}`,
        streamType: model,
        expectedVersion: version - 1,
        orgId,
        events: [{ eventId, type: `${singular}.${change}`, data }],
      });
      const stored = (await store.readStream(`${model}-${id}`, version))[0];
      if (!stored) throw new Error('appended event not found');
      return stored;
    },
    async close() {
      await modules.stop();
      await closeServer(server);
      await database.drop();
    },
  };
  return harness;
}

/** Polls `check` until it returns something other than undefined; rejects after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  what: string,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const result = await check();
    if (result !== undefined) return result;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
