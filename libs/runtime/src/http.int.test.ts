import type { Server } from 'node:http';
import { baseError } from '@ofp/contracts';
import { closeServer, createHttpApp, listen, MAX_BODY_BYTES, writeJson } from './http.js';
import { createLogger } from './logger.js';
import { createMetricsRegistry } from './metrics.js';

describe('the HTTP app factory', () => {
  let server: Server;
  let base: string;
  let ready = false;

  beforeAll(async () => {
    const app = createHttpApp({
      logger: createLogger({ name: 'http-test', level: 'silent' }),
      metrics: createMetricsRegistry('http-test'),
      ready: () => ready,
      routes: (router) => {
        router.post('/echo', (req, res) => void res.json({ body: req.body as unknown }));
        router.get('/conflict', () => {
          throw baseError('Conflict', 'taken');
        });
        router.get('/boom', () => {
          throw new Error('secret internals at /etc/passwd');
        });
        router.get('/db-down', () => {
          throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
        });
      },
      // Served ahead of express: `/fast/ok`, `/fast/conflict`, `/fast/boom`; other `/fast/*` fall through.
      fastRoutes: (req) => {
        const what = /^\/fast\/(ok|conflict|boom)$/.exec(req.url ?? '')?.[1];
        if (what === undefined) return undefined;
        return {
          route: '/fast/:what',
          handle: async (_req, res, request) => {
            await Promise.resolve();
            if (what === 'conflict') throw baseError('Conflict', 'taken');
            if (what === 'boom') throw new Error('secret internals at /etc/passwd');
            writeJson(res, 200, JSON.stringify({ request: request.id }));
          },
        };
      },
    });
    const listening = await listen(app, 0, '127.0.0.1');
    server = listening.server;
    base = `http://127.0.0.1:${listening.port}`;
  });
  afterAll(async () => {
    await closeServer(server);
  });

  const post = (body: string, type = 'application/json') =>
    fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': type }, body });

  it('answers an unknown route with a 404 envelope', async () => {
    const response = await fetch(`${base}/nowhere`);
    expect(response.status).toBe(404);
    expect(await response.json()).toEqual({
      count: 0,
      results: null,
      errors: { base: ['No route for GET /nowhere'] },
    });
  });

  it('answers malformed JSON with a 400 envelope and a body over 1 MiB with 413', async () => {
    const malformed = await post('{"a":');
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toEqual({
      count: 0,
      results: null,
      errors: { base: ['Malformed JSON in request body'] },
    });
    const large = await post(JSON.stringify({ a: 'x'.repeat(MAX_BODY_BYTES) }));
    expect(large.status).toBe(413);
    expect(((await large.json()) as { errors: unknown }).errors).toHaveProperty('base');
    expect((await post(JSON.stringify({ a: 1 }))).status).toBe(200);
  });

  it('maps domain errors to their status, hides unexpected ones, and 503s when a dependency is down', async () => {
    expect((await fetch(`${base}/conflict`)).status).toBe(409);
    const boom = await fetch(`${base}/boom`, { headers: { 'x-request-id': 'req-42' } });
    expect(boom.status).toBe(500);
    const text = await boom.text();
    expect(JSON.parse(text)).toEqual({
      count: 0,
      results: null,
      errors: { base: ['Internal error (request req-42)'] },
    });
    expect(text).not.toContain('passwd');
    const down = await fetch(`${base}/db-down`);
    expect(down.status).toBe(503);
    expect(down.headers.get('retry-after')).toBe('1');
  });

  it('serves fast routes ahead of express, with request ids, error envelopes and metrics', async () => {
    const ok = await fetch(`${base}/fast/ok`, { headers: { 'x-request-id': 'fast-1' } });
    expect(ok.headers.get('x-request-id')).toBe('fast-1');
    expect(ok.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(await ok.json()).toEqual({ request: 'fast-1' });
    const conflict = await fetch(`${base}/fast/conflict`);
    expect(conflict.status).toBe(409);
    expect(await conflict.json()).toEqual({ count: 0, results: null, errors: { base: ['taken'] } });
    const boom = await fetch(`${base}/fast/boom`);
    expect(boom.status).toBe(500);
    const body = await boom.text();
    expect(body).toContain(boom.headers.get('x-request-id')!);
    expect(body).not.toContain('secret');
    expect((await fetch(`${base}/fast/other`)).status).toBe(404);
    expect(await (await fetch(`${base}/metrics`)).text()).toMatch(
      /http_request_duration_seconds_count\{service="http-test",method="GET",route="\/fast\/:what",status="409"\} 1/,
    );
  });

  it('echoes a usable X-Request-Id and makes one up otherwise', async () => {
    expect(
      (await fetch(`${base}/livez`, { headers: { 'x-request-id': 'abc-1' } })).headers.get('x-request-id'),
    ).toBe('abc-1');
    expect(
      (await fetch(`${base}/livez`, { headers: { 'x-request-id': 'has space' } })).headers.get(
        'x-request-id',
      ),
    ).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('keeps /livez up and /readyz at 503 until ready, and serves Prometheus metrics', async () => {
    expect((await fetch(`${base}/livez`)).status).toBe(200);
    expect((await fetch(`${base}/readyz`)).status).toBe(503);
    ready = true;
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toContain('http_request_duration_seconds_bucket');
    expect(metrics).toContain('process_cpu_user_seconds_total');
  });
});
