// `npm run bench:auth`: tokens issued per second (client credentials) by the platform and, in the same
// run and from the same load generator, by node-oidc-provider with its clients in Postgres (issue 28), next
// to a plain HTTP loop to the platform; with the CPU time per token of each server, of its database's
// Postgres backends and of this load generator. Both run as a user runs them: a durable Postgres (fsync
// and synchronous commit on, an embedded cluster of its own unless DATABASE_URL is set), the platform at
// its default `info` log level. Then what bearer verification adds to a request (CPU and latency), next
// to the raw cost of one jose jwtVerify (issues 4, 17 and 27). `-- --soak`: a million client-credentials tokens,
// with the auth schema's size before and after (BENCH_SOAK_TOKENS).

import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { jwtVerify } from 'jose';
import pg from 'pg';
import { Pool as HttpPool } from 'undici';
import {
  BearerGate,
  RevocationDenyList,
  TokenBucketLimiter,
  createJwksKeySource,
  createTokenVerifier,
} from '@ofp/auth-tokens';
import { createMetricsRegistry } from '@ofp/runtime';
import {
  PUBLIC,
  closeServer,
  createHttpApp,
  jsonReply,
  listen,
  type Access,
  type Route,
} from '@ofp/http-api';
import { startEmbeddedPostgres } from '@ofp/standalone';
import {
  CACHE_DIR,
  createIntegrator,
  freePort,
  startPlatform,
  testLogger,
  UNLIMITED_RATE,
} from '@ofp/testing';
import { startLean } from './lean.js';
import {
  cpuPerUnit,
  cpuProfileOptions,
  formatCpu,
  loadGenerator,
  maxAndHalfRate,
  measure,
  measureFor,
  postgresBackends,
  processes,
  profileTable,
  progressBar,
  warmUp,
  withCpu,
  type CpuUsed,
  type Measurement,
} from './measure.js';

/** Seconds of each loop at its maximum rate, and then at half of it. */
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 3);
/** Tokens in flight: a few integrators' machines asking at once. */
const CONCURRENCY = 8;
const SOAK = process.argv.includes('--soak');
const SOAK_TOKENS = Number(process.env.BENCH_SOAK_TOKENS ?? 1_000_000);

const logger = testLogger('bench');
const cluster = await durablePostgres();
const platformDatabase = await cluster.database('bench_auth');
const oidcDatabase = await cluster.database('bench_oidc_provider');
const platform = await startPlatform({
  databaseUrl: platformDatabase,
  env: { ...UNLIMITED_RATE, LOG_LEVEL: 'info', LOG_FORMAT: 'json' },
  nodeOptions: cpuProfileOptions(),
});
const audience = platform.authUrl;
const oidcProvider = await startLean('oidc-provider', {
  DATABASE_URL: oidcDatabase,
  ISSUER: 'http://oidc-provider.bench',
  AUDIENCE: audience,
});
const postgres = await postgresBackends(platformDatabase);
const oidcPostgres = await postgresBackends(oidcDatabase, 'postgres (oidc-provider)');
try {
  const integrator = await createIntegrator(platform, { name: 'Bench' });
  const basic = `Basic ${Buffer.from(`${integrator.clientId}:${integrator.clientSecret}`).toString('base64')}`;
  const http = new HttpPool(platform.authUrl, { connections: CONCURRENCY });
  const oidcHttp = new HttpPool(oidcProvider.url!, { connections: CONCURRENCY });
  const oidcBasic = await registerOidcClient(oidcDatabase);

  // 1. Token issuance over HTTP (client authentication, signing, whatever is stored) by the platform and by
  // oidc-provider, vs a plain HTTP loop to the platform.
  const tokens: string[] = [];
  const tokenRequest = (pool: HttpPool, path: string, authorization: string) => async (): Promise<string> => {
    const response = await pool.request({
      method: 'POST',
      path,
      headers: { authorization, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials&scope=read+write+operations',
    });
    const body = await response.body.text();
    if (response.statusCode !== 200) throw new Error(`${path}: ${response.statusCode} ${body}`);
    return (JSON.parse(body) as { access_token: string }).access_token;
  };
  const platformToken = tokenRequest(http, '/oauth/token', basic);
  const issue = async (): Promise<void> => {
    const token = await platformToken();
    if (tokens.length < 5_000) tokens.push(token);
  };
  const oidcToken = tokenRequest(oidcHttp, '/token', oidcBasic);
  const issueByOidcProvider = async (): Promise<void> => {
    await oidcToken();
  };
  const plain = async (): Promise<void> => {
    const response = await http.request({ method: 'GET', path: '/livez' });
    await response.body.text();
  };
  const participants = [
    processes('platform', Object.values(platform.pids)),
    postgres,
    processes('oidc-provider', [oidcProvider.pid]),
    oidcPostgres,
    loadGenerator('loadgen'),
  ];
  await warmUp(WARMUP_SECONDS, CONCURRENCY, issue);
  await warmUp(WARMUP_SECONDS, CONCURRENCY, issueByOidcProvider);
  await warmUp(WARMUP_SECONDS, CONCURRENCY, plain);
  const issued = await maxAndHalfRate(participants, SECONDS, CONCURRENCY, issue);
  const byOidcProvider = await maxAndHalfRate(participants, SECONDS, CONCURRENCY, issueByOidcProvider);
  const baseline = await maxAndHalfRate(participants, SECONDS, CONCURRENCY, plain);
  const issuance = profileTable(
    participants.map(({ name }) => name),
    'request',
  );
  console.log(
    `\nToken issuance (client_credentials, durable Postgres, platform logging at info), concurrency ${CONCURRENCY}`,
  );
  console.log(issuance.header);
  console.log(issuance.row('POST /oauth/token', issued));
  console.log(issuance.row('oidc-provider POST /token', byOidcProvider));
  console.log(issuance.row('GET /livez', baseline));
  const postgresPerToken = cpuPerUnit(issued.maxCpu, 'postgres', issued.max.operations);
  console.log(
    `POST /oauth/token: ${((100 * issued.max.perSecond) / byOidcProvider.max.perSecond).toFixed(0)}% of oidc-provider's rate (goal >= 100%: ${issued.max.perSecond >= byOidcProvider.max.perSecond ? 'met' : 'missed'}), ${((100 * issued.max.perSecond) / baseline.max.perSecond).toFixed(0)}% of GET /livez's; Postgres CPU per token ${postgresPerToken?.toFixed(0) ?? 'n/a'} µs (goal <= 100 µs: ${postgresPerToken === undefined ? 'n/a' : postgresPerToken <= 100 ? 'met' : 'missed'})`,
  );
  await oidcHttp.close();

  if (SOAK) await soak(platformDatabase, SOAK_TOKENS, CONCURRENCY, issue);

  // 2. What bearer verification adds: one route behind the bearer gate, one without, same app, over HTTP,
  // served by this process (its CPU is the server's and the client's together: the difference is the
  // verification's).
  const keys = createJwksKeySource({
    url: `${platform.authUrl}/.well-known/jwks.json`,
    logger,
  });
  const verifier = createTokenVerifier({
    issuer: platform.authUrl,
    keys,
    denyList: new RevocationDenyList(() => new Date()),
    clock: () => new Date(),
  });
  const gate = new BearerGate(
    verifier,
    new TokenBucketLimiter({ capacity: 1e9, refillPerSecond: 1e9 }, () => new Date()),
  );
  const answer = (path: string, access: Access): Route => ({
    method: 'GET',
    path,
    operationId: path,
    summary: path,
    description: path,
    tag: 'bench',
    access,
    responses: { 200: { description: 'ok' } },
    handle: () => Promise.resolve(jsonReply(200, { ok: true })),
  });
  const app = createHttpApp({
    logger,
    metrics: createMetricsRegistry('bench'),
    ready: () => true,
    routes: [answer('/open', PUBLIC), answer('/guarded', gate.access([]))],
  });
  const { server: local, port } = await listen(app, 0, '127.0.0.1');
  const localHttp = new HttpPool(`http://127.0.0.1:${port}`, { connections: 1 });
  const get =
    (path: string, token: (i: number) => string = () => integrator.accessToken) =>
    async (i: number): Promise<void> => {
      const response = await localHttp.request({
        method: 'GET',
        path,
        headers: { authorization: `Bearer ${token(i)}` },
      });
      await response.body.text();
      if (response.statusCode !== 200) throw new Error(`${path}: ${response.statusCode}`);
    };
  const self = [loadGenerator('this process')];
  await warmUp(WARMUP_SECONDS, 1, get('/guarded'));
  await warmUp(WARMUP_SECONDS, 1, get('/open'));
  // Closed loops only: this process is client and server at once, so an open loop here would measure
  // its own timers more than the server.
  const guarded = await withCpu(self, () => measureFor(SECONDS, 1, get('/guarded')));
  const open = await withCpu(self, () => measureFor(SECONDS, 1, get('/open')));
  // Each request with a token the verifier has not seen: the signature is checked in full. The tokens
  // issued above are a few seconds' worth, so the run is as long as they last.
  const firstUse = await withCpu(self, () =>
    measure(
      tokens.length,
      1,
      get('/guarded', (i) => tokens[i]!),
    ),
  );
  await localHttp.close();
  await closeServer(local);

  // 3. The raw cost of one jose jwtVerify with the same key and token.
  const { key } = await jwtVerify(integrator.accessToken, keys, { algorithms: ['RS256'] });
  const rounds = 20_000;
  const begun = performance.now();
  for (let i = 0; i < rounds; i++) await jwtVerify(integrator.accessToken, key, { algorithms: ['RS256'] });
  const rawVerifyUs = ((performance.now() - begun) * 1000) / rounds;

  const cpuUs = ({ result, cpu }: { result: Measurement; cpu: CpuUsed }): number =>
    cpuPerUnit(cpu, 'this process', result.operations) ?? Number.NaN;
  const line = (name: string, run: { result: Measurement; cpu: CpuUsed }): string =>
    `${name.padEnd(26)} ${`${run.result.perSecond.toFixed(0)}/s`.padStart(8)}  p50 ${run.result.p50Ms.toFixed(3)} ms  p99 ${run.result.p99Ms.toFixed(3)} ms  | ${cpuUs(run).toFixed(0).padStart(5)} µs of CPU per request`;
  console.log(
    `\nBearer verification, sequential requests to an express app in this process (client and server: one CPU figure)`,
  );
  console.log(line('GET, token seen before', guarded));
  console.log(line('GET, first use of token', firstUse));
  console.log(line('GET, no auth', open));
  console.log(
    `added by verification: ${(cpuUs(guarded) - cpuUs(open)).toFixed(0)} µs of CPU per request for a token seen before, ${(cpuUs(firstUse) - cpuUs(open)).toFixed(0)} µs on first use; raw jose jwtVerify (RS256): ${rawVerifyUs.toFixed(0)} µs per call`,
  );
  await http.close();
} finally {
  await postgres.close?.();
  await oidcPostgres.close?.();
  await oidcProvider.stop();
  await platform.stop();
  await cluster.stop();
}

/**
 * A Postgres as a user runs one: `DATABASE_URL` when set, else an embedded cluster of its own in
 * `.cache/`, durable (fsync and synchronous commit on, unlike the tests' cluster), removed afterwards.
 */
async function durablePostgres(): Promise<{
  database(name: string): Promise<string>;
  stop(): Promise<void>;
}> {
  const given = process.env.DATABASE_URL;
  const dataDir = join(CACHE_DIR, `bench-auth-${randomBytes(4).toString('hex')}`);
  const running = given
    ? { url: given, stop: () => Promise.resolve() }
    : await startEmbeddedPostgres({ dataDir, port: await freePort(), logger });
  const admin = new pg.Client({ connectionString: running.url });
  await admin.connect();
  const created: string[] = [];
  return {
    async database(prefix) {
      const name = `${prefix}_${randomBytes(4).toString('hex')}`;
      await admin.query(`CREATE DATABASE "${name}"`);
      created.push(name);
      const url = new URL(running.url);
      url.pathname = `/${name}`;
      return url.toString();
    },
    async stop() {
      for (const name of created) await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await admin.end();
      await running.stop();
      if (given) return;
      await rm(dataDir, { recursive: true, force: true });
      await rm(`${dataDir}.password`, { force: true });
    },
  };
}

/** A client of oidc-provider's, stored as its adapter reads it; resolves with its Basic credentials. */
async function registerOidcClient(databaseUrl: string): Promise<string> {
  const id = 'bench-client';
  const secret = randomBytes(32).toString('base64url');
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  await client.query('INSERT INTO oidc_clients (id, payload) VALUES ($1, $2)', [
    id,
    {
      client_id: id,
      client_secret: secret,
      grant_types: ['client_credentials'],
      response_types: [],
      redirect_uris: [],
      scope: 'read write operations',
    },
  ]);
  await client.end();
  return `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
}

/**
 * Issues `count` client-credentials tokens and prints the auth schema's size before and after, and the
 * rows of each of its tables (API.md §7: storage does not grow with the number of tokens issued).
 */
async function soak(
  databaseUrl: string,
  count: number,
  concurrency: number,
  issue: () => Promise<void>,
): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const storage = async (): Promise<string> => {
    await client.query('VACUUM ANALYZE');
    const { rows } = await client.query<{ tables: string; bytes: string }>(
      `SELECT string_agg(format('%s %s rows', c.relname, c.reltuples::bigint), ', ' ORDER BY c.relname) AS tables,
              pg_size_pretty(sum(pg_total_relation_size(c.oid))) AS bytes
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'auth' AND c.relkind = 'r'`,
    );
    return `${rows[0]!.bytes} (${rows[0]!.tables})`;
  };
  console.log(`\nSoak: ${count.toLocaleString('en')} client-credentials tokens`);
  console.log(`auth schema before: ${await storage()}`);
  const bar = progressBar('issuing tokens {bar} {value}/{total} ({percentage}%) {eta_formatted} left');
  bar.start(count, 0);
  const step = 10_000;
  const result = await withCpu([postgres, loadGenerator('loadgen')], async () => {
    for (let done = 0; done < count; done += step) {
      await measure(Math.min(step, count - done), concurrency, issue);
      bar.update(Math.min(count, done + step));
    }
  });
  bar.stop();
  console.log(`auth schema after:  ${await storage()}`);
  console.log(formatCpu(result.cpu, count, 'token'));
  await client.end();
}
