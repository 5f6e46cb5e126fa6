// `npm run bench:auth` (issue 4): tokens issued per second, database included, next to a plain HTTP
// loop to the same process; and the latency bearer verification adds to a request, next to the raw
// cost of one jwt.verify, measured in the same run.

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
import { createIntegrator, startPlatform, startScratchDatabase, testLogger } from '@ofp/testing';
import { formatRow, measure } from './measure.js';

const TOKENS = Number(process.env.BENCH_TOKENS ?? 2_000);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 5_000);
const CONCURRENCY = 8;

const logger = testLogger('bench');
const database = await startScratchDatabase(logger, 'bench_auth');
const platform = await startPlatform({
  databaseUrl: database.url,
  env: { RATE_LIMIT_CAPACITY: '100000000', RATE_LIMIT_REFILL_PER_SECOND: '100000000' },
});
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
    tokens.push((JSON.parse(body) as { access_token: string }).access_token);
  };
  const plain = async (): Promise<void> => {
    const response = await http.request({ method: 'GET', path: '/livez' });
    await response.body.text();
  };
  await measure(200, CONCURRENCY, issue);
  await measure(200, CONCURRENCY, plain);
  const issued = await measure(TOKENS, CONCURRENCY, issue);
  const baseline = await measure(TOKENS, CONCURRENCY, plain);
  console.log(`\ntoken issuance (client_credentials, database included), concurrency ${CONCURRENCY}`);
  console.log(formatRow('POST /oauth/token', issued, baseline, 'GET /livez'));

  // 2. What bearer verification adds: one route behind the bearer gate, one without, same app, over HTTP.
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
  await measure(500, 1, get('/guarded'));
  await measure(500, 1, get('/open'));
  const guarded = await measure(REQUESTS, 1, get('/guarded'));
  const open = await measure(REQUESTS, 1, get('/open'));
  // Each request with a token the verifier has not seen: the signature is checked in full.
  const firstUse = await measure(
    Math.min(tokens.length, REQUESTS),
    1,
    get('/guarded', (i) => tokens[i]!),
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

  console.log(`\nbearer verification, sequential requests (concurrency 1)`);
  console.log(formatRow('GET, token seen before', guarded, open, 'no auth'));
  console.log(formatRow('GET, first use of token', firstUse, open, 'no auth'));
  console.log(
    `added by verification (p50): ${((guarded.p50Ms - open.p50Ms) * 1000).toFixed(0)} µs for a token seen before, ${((firstUse.p50Ms - open.p50Ms) * 1000).toFixed(0)} µs on first use; raw jwt.verify (RS256): ${rawVerifyUs.toFixed(0)} µs per call`,
  );
  await http.close();
} finally {
  await platform.stop();
  await database.stop();
}
