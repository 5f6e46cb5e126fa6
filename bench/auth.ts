// `npm run bench:auth`: tokens issued per second, database included, next to a plain HTTP loop to the same
// process, with the CPU time per token of the platform, its database's Postgres backends and this load
// generator; and what bearer verification adds to a request (CPU and latency), next to the raw cost of
// one jwt.verify, measured in the same run (issues 4 and 17).

import { createPublicKey } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import jwt from 'jsonwebtoken';
import { Pool as HttpPool } from 'undici';
import {
  BearerGate,
  RevocationDenyList,
  TokenBucketLimiter,
  createJwksKeySource,
  createTokenVerifier,
} from '@ofp/auth-tokens';
import {
  PUBLIC,
  closeServer,
  createHttpApp,
  createMetricsRegistry,
  jsonReply,
  listen,
  type Access,
  type Route,
} from '@ofp/runtime';
import {
  createIntegrator,
  startPlatform,
  startScratchDatabase,
  testLogger,
  UNLIMITED_RATE,
} from '@ofp/testing';
import {
  cpuPerUnit,
  cpuProfileOptions,
  loadGenerator,
  maxAndHalfRate,
  measure,
  measureFor,
  postgresBackends,
  processes,
  profileTable,
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

const logger = testLogger('bench');
const database = await startScratchDatabase(logger, 'bench_auth');
const platform = await startPlatform({
  databaseUrl: database.url,
  env: UNLIMITED_RATE,
  nodeOptions: cpuProfileOptions(),
});
const postgres = await postgresBackends(database.url);
try {
  const integrator = await createIntegrator(platform, { name: 'Bench' });
  const basic = `Basic ${Buffer.from(`${integrator.clientId}:${integrator.clientSecret}`).toString('base64')}`;
  const http = new HttpPool(platform.authUrl, { connections: CONCURRENCY });

  // 1. Token issuance over HTTP (client authentication, grant rows, signing) vs a plain HTTP loop.
  const tokens: string[] = [];
  const issue = async (): Promise<void> => {
    const response = await http.request({
      method: 'POST',
      path: '/oauth/token',
      headers: { authorization: basic, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials',
    });
    const body = await response.body.text();
    if (response.statusCode !== 200) throw new Error(`token: ${response.statusCode} ${body}`);
    if (tokens.length < 5_000) tokens.push((JSON.parse(body) as { access_token: string }).access_token);
  };
  const plain = async (): Promise<void> => {
    const response = await http.request({ method: 'GET', path: '/livez' });
    await response.body.text();
  };
  const participants = [
    processes('platform', Object.values(platform.pids)),
    postgres,
    loadGenerator('loadgen'),
  ];
  await warmUp(WARMUP_SECONDS, CONCURRENCY, issue);
  await warmUp(WARMUP_SECONDS, CONCURRENCY, plain);
  const issued = await maxAndHalfRate(participants, SECONDS, CONCURRENCY, issue);
  const baseline = await maxAndHalfRate(participants, SECONDS, CONCURRENCY, plain);
  const issuance = profileTable(
    participants.map(({ name }) => name),
    'request',
  );
  console.log(`\nToken issuance (client_credentials, database included), concurrency ${CONCURRENCY}`);
  console.log(issuance.header);
  console.log(issuance.row('POST /oauth/token', issued));
  console.log(issuance.row('GET /livez', baseline));
  console.log(
    `POST /oauth/token: ${((100 * issued.max.perSecond) / baseline.max.perSecond).toFixed(0)}% of GET /livez's rate; goal >= 1,000 tokens/s: ${issued.max.perSecond >= 1_000 ? 'met' : 'missed'}`,
  );

  // 2. What bearer verification adds: one route behind the bearer gate, one without, same app, over HTTP,
  // served by this process (its CPU is the server's and the client's together: the difference is the
  // verification's).
  const keys = createJwksKeySource({
    url: `${platform.authUrl}/.well-known/jwks.json`,
    clock: () => new Date(),
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

  // 3. The raw cost of one jwt.verify with the same key and token.
  const { header } = jwt.decode(integrator.accessToken, { complete: true })!;
  const key = (await keys.getKey(header.kid!)) ?? createPublicKey('');
  const rounds = 20_000;
  const begun = performance.now();
  for (let i = 0; i < rounds; i++) jwt.verify(integrator.accessToken, key, { algorithms: ['RS256'] });
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
    `added by verification: ${(cpuUs(guarded) - cpuUs(open)).toFixed(0)} µs of CPU per request for a token seen before, ${(cpuUs(firstUse) - cpuUs(open)).toFixed(0)} µs on first use; raw jwt.verify (RS256): ${rawVerifyUs.toFixed(0)} µs per call`,
  );
  await http.close();
} finally {
  await postgres.close?.();
  await platform.stop();
  await database.stop();
}
