// @runs-alone: request and header timeouts of 0.3 to 1.5 s, timed
import { createHash, randomBytes } from 'node:crypto';
import type { RequestListener, Server } from 'node:http';
import { connect } from 'node:net';
import { pino } from 'pino';
import { baseError } from '@ofp/contracts';
import { closeServer, createHttpApp, listen, MAX_BODY_BYTES, MAX_BODY_DEPTH } from './http.js';
import { IdempotencyStore } from './idempotency.js';
import { createMetricsRegistry, createPool, inTransaction, type Pool } from '@ofp/runtime';
import { jsonReply } from './reply.js';
import { PUBLIC, type Access, type Route } from './routes.js';

/** A stand-in for a bearer access: `Bearer <org>:<scope,scope>`. */
const bearer = (scopes: string[]): Access<{ org: number }> => ({
  kind: 'bearer',
  scopes,
  authenticate(request) {
    const match = /^Bearer (\d+):([a-z,]*)$/.exec(request.headers.authorization ?? '');
    if (!match) return Promise.reject(baseError('Unauthenticated', 'An access token is required'));
    return Promise.resolve({
      principal: { org: Number(match[1]) },
      scopes: match[2]!.split(','),
      headers: { 'RateLimit-Remaining': '9' },
      organization: Number(match[1]),
      client: `client-${match[1]}`,
    });
  },
});

/** Statements that input can make Postgres refuse, one per SQLSTATE the pipeline must answer with a 4xx. */
const STATEMENTS = {
  short: 'INSERT INTO http_test_values (short) VALUES ($1)',
  amount: 'INSERT INTO http_test_values (amount) VALUES ($1)',
  whole: 'INSERT INTO http_test_values (whole) VALUES ($1)',
  at: 'INSERT INTO http_test_values (at) VALUES ($1)',
  indexed: 'INSERT INTO http_test_values (indexed) VALUES ($1)',
  document: 'INSERT INTO http_test_values (document) VALUES ($1)',
  // A string parameter reaches Postgres as UTF-8 whatever it holds: bytes that are not come only decoded.
  utf8: "SELECT convert_from(decode($1, 'hex'), 'UTF8')",
} as const;

const route = (
  method: Route['method'],
  path: string,
  handle: Route['handle'],
  more: Partial<Route> = {},
): Route => ({
  method,
  path,
  operationId: `${method} ${path}`,
  summary: 'test',
  description: 'A route of the test',
  tag: 'test',
  access: PUBLIC,
  responses: { 200: { description: 'ok' } },
  handle,
  ...more,
});

describe('the HTTP pipeline', () => {
  let server: Server;
  let base: string;
  let app: RequestListener;
  let ready = false;
  const logged: Record<string, unknown>[] = [];
  let pool: Pool;

  beforeAll(async () => {
    pool = createPool({ connectionString: process.env.DATABASE_URL!, applicationName: 'http-test' });
    await pool.query(`CREATE TABLE IF NOT EXISTS http_test_values (
  short varchar(3), amount numeric(5,2), indexed text, whole integer, at date, document jsonb)`);
    await pool.query('CREATE INDEX IF NOT EXISTS http_test_values_indexed ON http_test_values (indexed)');
    await pool.query('DROP TABLE IF EXISTS http_test_writes, http_test_keys');
    await pool.query('CREATE TABLE http_test_writes (id serial PRIMARY KEY, note text)');
    const keys = new IdempotencyStore(pool, 'public.http_test_keys');
    await inTransaction(pool, (client) => keys.layOut(client));
    const writes = {
      access: bearer(['write']),
      body: 'json',
      headers: ['Idempotency-Key', 'Prefer'],
      idempotency: keys,
    } as const;
    app = createHttpApp({
      logger: pino(
        { level: 'info' },
        { write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>) },
      ),
      metrics: createMetricsRegistry('http-test'),
      ready: () => ready,
      routes: [
        route('POST', '/echo', (request) => Promise.resolve(jsonReply(200, { body: request.body })), {
          body: 'json',
        }),
        route('GET', '/conflict', () => Promise.reject(baseError('Conflict', 'taken'))),
        // Runs a statement on the body's value as a write would: what Postgres refuses is the request's error.
        route(
          'POST',
          '/values',
          async (request) => {
            const { statement, value } = request.body as {
              statement: keyof typeof STATEMENTS;
              value: unknown;
            };
            await pool.query(STATEMENTS[statement], [value]);
            return jsonReply(200, {});
          },
          { body: 'json' },
        ),
        route('GET', '/boom', () => Promise.reject(new Error('secret internals at /etc/passwd'))),
        route('GET', '/db-down', () =>
          Promise.reject(
            Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
          ),
        ),
        route(
          'GET',
          '/v2/things',
          (request) => Promise.resolve(jsonReply(200, { q: request.query.q ?? null })),
          {
            access: bearer(['read']),
            query: { names: ['q'] },
          },
        ),
        // A write that records its answer with its change, slowly enough for requests to race; a body
        // with `fail` fails after recording, in the same transaction.
        route(
          'POST',
          '/v2/writes',
          (request) =>
            inTransaction(pool, async (client) => {
              const { note, fail } = request.body as { note: string; fail?: boolean };
              const { rows } = await client.query<{ id: number }>(
                'INSERT INTO http_test_writes (note) SELECT $1 FROM pg_sleep(0.1) RETURNING id',
                [note],
              );
              const id = rows[0]!.id;
              const reply = jsonReply(201, { id, note }, { Location: `/v2/writes/${id}`, ETag: `W/"${id}"` });
              await request.idempotency?.record(client, reply);
              if (fail) throw baseError('Unprocessable', 'failed after recording');
              return reply;
            }),
          writes,
        ),
        // A write that forgets to record its answer: a defect the pipeline does not let pass.
        route('POST', '/v2/forgetful', () => Promise.resolve(jsonReply(201, {})), writes),
        route(
          'DELETE',
          '/v2/things/{id}',
          (request) => Promise.resolve(jsonReply(200, { id: request.params.id })),
          {
            access: bearer(['write', 'operations']),
          },
        ),
      ],
    });
    const listening = await listen(app, 0, '127.0.0.1');
    server = listening.server;
    base = `http://127.0.0.1:${listening.port}`;
  });
  afterAll(async () => {
    await closeServer(server);
    await pool.query('DROP TABLE IF EXISTS http_test_values, http_test_writes, http_test_keys');
    await pool.end();
  });

  const post = (body: string, type = 'application/json', path = '/echo') =>
    fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': type }, body });
  const envelope = (base: string[]) => ({ count: 0, results: null, errors: { base } });
  /** Sends `request` as it is over a new connection and resolves with all the server sent until it closed. */
  const rawExchange = (request: string) =>
    new Promise<string>((resolve, reject) => {
      const { port } = new URL(base);
      const socket = connect(Number(port), '127.0.0.1', () => socket.end(request));
      const chunks: Buffer[] = [];
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      socket.on('error', reject);
      socket.on('close', () => resolve(Buffer.concat(chunks).toString()));
      socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')));
    });

  it('survives a client that resets its keep-alive connection after an answer', async () => {
    // Node clears a socket's _httpMessage (to null) once its response is written: the reset then reached
    // the clientError handler with null, which it took for a pending response, and the TypeError it
    // threw ended the process (a webhook dispatcher of the chaos run, seed 787853717).
    const { port } = new URL(base);
    const socket = connect(Number(port), '127.0.0.1');
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.once('data', () => resolve());
      socket.write('GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    });
    socket.resetAndDestroy();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await fetch(`${base}/nowhere`)).status).toBe(404);
  });

  it('answers an unknown route with a 404 envelope, and a known path with a 405 naming the methods it takes', async () => {
    const nowhere = await fetch(`${base}/nowhere`);
    expect(nowhere.status).toBe(404);
    expect(await nowhere.json()).toEqual(envelope(['No route for GET /nowhere']));
    const put = await fetch(`${base}/v2/things/7`, { method: 'PUT' });
    expect(put.status).toBe(405);
    expect(put.headers.get('allow')).toBe('DELETE');
    expect(await put.json()).toEqual(envelope(['PUT is not allowed here']));
  });

  it('serves /v2 paths under /api/v2 too, and ignores a trailing slash', async () => {
    const auth = { authorization: 'Bearer 1:read' };
    expect((await fetch(`${base}/api/v2/things`, { headers: auth })).status).toBe(200);
    expect((await fetch(`${base}/v2/things/`, { headers: auth })).status).toBe(200);
  });

  it('answers malformed or empty JSON with a 400, another content type with a 415 and a body over 1 MiB with a 413', async () => {
    const malformed = await post('{"a":');
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toEqual(envelope(['Malformed JSON in request body']));
    // No bytes at all, with the JSON content type, are no JSON text either (RFC 8259 §2), not `{}`.
    for (const nothing of ['', ' \r\n']) {
      const empty = await post(nothing);
      expect(empty.status).toBe(400);
      expect(await empty.json()).toEqual(envelope(['The request body is empty: send a JSON object']));
    }
    expect((await post('a=1', 'application/x-www-form-urlencoded')).status).toBe(415);
    const large = await post(JSON.stringify({ a: 'x'.repeat(MAX_BODY_BYTES) }));
    expect(large.status).toBe(413);
    expect(((await large.json()) as { errors: unknown }).errors).toHaveProperty('base');
    expect(await (await post(JSON.stringify({ a: 1 }))).json()).toEqual({ body: { a: 1 } });
  });

  it('reads the rest of a body over 1 MiB, so that its client gets the 413 and its connection goes on', async () => {
    // fetch keeps the connection alive: before, the third body on it waited for ever (the server read
    // none of the second's rest, and stopped reading the connection).
    const large = JSON.stringify({ a: 'x'.repeat(MAX_BODY_BYTES + 400_000) });
    for (let i = 0; i < 4; i++) {
      const answer = await fetch(`${base}/echo`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: large,
        signal: AbortSignal.timeout(5_000),
      });
      expect(answer.status).toBe(413);
      await answer.body?.cancel();
    }
    expect(await (await post(JSON.stringify({ a: 1 }))).json()).toEqual({ body: { a: 1 } });
  });

  it.each<[string, number[]]>([
    ['a lone byte beyond ASCII', [0x7b, 0xff, 0x7d]],
    ['an overlong encoding', [0x22, 0xc0, 0xaf, 0x22]],
    ['a surrogate encoded in UTF-8', [0x22, 0x61, 0xed, 0xa0, 0x80, 0x22]],
    ['a character cut short', [0x22, 0xe2, 0x82]],
    ['a code point beyond U+10FFFF', [0x22, 0xf4, 0x90, 0x80, 0x80, 0x22]],
  ])('refuses a body that is not UTF-8 (%s) with a 400 saying where', async (_case, bytes) => {
    const response = await fetch(`${base}/echo`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: Buffer.from(bytes),
    });
    expect(response.status).toBe(400);
    const offset = bytes.findIndex((byte) => byte >= 0x80);
    const hex = bytes[offset]!.toString(16).toUpperCase();
    expect(await response.json()).toEqual(
      envelope([
        `Request body must be UTF-8: the byte 0x${hex} at offset ${offset} does not start a valid UTF-8 character`,
      ]),
    );
  });

  it.each([
    ['{"last_name":"x\\ud800"}', 'last_name holds a lone surrogate (\\ud800)'],
    ['{"lines":[{"sku":"a"},{"sku":"\\uDC00b"}]}', 'lines[1].sku holds a lone surrogate (\\udc00)'],
    ['{"a\\ud83d":1}', 'a key of the body holds a lone surrogate (\\ud83d)'],
    ['"\\ud800"', 'the body holds a lone surrogate (\\ud800)'],
  ])('refuses an escaped lone surrogate (%s) with a 400 naming the column', async (body, where) => {
    const response = await post(body);
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual(
      envelope([`Request body text must be UTF-8: ${where}, which is no character`]),
    );
  });

  it.each([
    [
      'an invalid Content-Length',
      'Content-Length: abc\r\n\r\n{}',
      'Malformed HTTP request: Invalid character in Content-Length',
      false,
    ],
    [
      'both Content-Length and Transfer-Encoding',
      'Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n',
      "Malformed HTTP request: Transfer-Encoding can't be present with Content-Length",
      false,
    ],
    [
      'a chunk size that is not hexadecimal',
      'Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n',
      'Malformed HTTP request: Invalid character in chunk size',
      true,
    ],
  ])(
    'answers a request its parser refuses (%s) with a 400 in the envelope, not a reset',
    async (_case, rest, message, headersRead) => {
      const answer = await rawExchange(
        `POST /echo HTTP/1.1\r\nHost: x\r\nX-Request-Id: refused-1\r\nContent-Type: application/json\r\n${rest}`,
      );
      expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 400 Bad Request');
      expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual(envelope([message]));
      // Every response carries X-Request-Id (API.md §3): the request's own once its headers were read.
      expect(answer).toMatch(
        headersRead ? /\r\nX-Request-Id: refused-1\r\n/ : /\r\nX-Request-Id: [0-9a-f-]{36}\r\n/,
      );
    },
  );

  it.each([
    ['its headers stop mid-way', 'GET /echo HTTP/1.1\r\nHost: x\r\n', /[0-9a-f-]{36}/],
    [
      'its body stops short of its Content-Length',
      'POST /echo HTTP/1.1\r\nHost: x\r\nX-Request-Id: slow-1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":',
      /slow-1/,
    ],
  ])(
    'answers a request that is not received in time (%s) with a 408 in the envelope',
    async (_case, sent, id) => {
      // The production timeouts (20 s, 30 s, checked every second) shortened, so the 408 comes within a second.
      const slow = await listen(app, 0, '127.0.0.1', { headersMs: 300, requestMs: 600, checkEveryMs: 100 });
      try {
        const answer = await new Promise<string>((resolve, reject) => {
          // Written and left open: the client neither finishes the request nor closes the connection.
          const socket = connect(slow.port, '127.0.0.1', () => socket.write(sent));
          const chunks: Buffer[] = [];
          socket.on('data', (chunk: Buffer) => chunks.push(chunk));
          socket.on('error', reject);
          socket.on('close', () => resolve(Buffer.concat(chunks).toString()));
          socket.setTimeout(5_000, () => socket.destroy(new Error('no answer within 5 s')));
        });
        expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 408 Request Timeout');
        expect(answer).toMatch(new RegExp(`\r\nX-Request-Id: ${id.source}\r\n`));
        expect(answer).toMatch(/\r\nConnection: close\r\n/);
        expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual(
          envelope(['The request was not received in full within 0.6 s (its headers within 0.3 s)']),
        );
      } finally {
        await closeServer(slow.server);
      }
    },
  );

  it('answers an unknown method with a 400 in the envelope, not a reset', async () => {
    const answer = await rawExchange('FOO /echo HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 400 Bad Request');
    expect(answer).toMatch(/\r\nX-Request-Id: [0-9a-f-]{36}\r\n/);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual(
      envelope(['Malformed HTTP request: Invalid method encountered']),
    );
  });

  it('refuses a body nested deeper than records nest, before parsing it', async () => {
    const deep = (depth: number) => `${'{"a":['.repeat(depth)}"\\ud800"${']}'.repeat(depth)}`;
    const response = await post(deep(MAX_BODY_DEPTH));
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual(
      envelope([`Request body nests arrays and objects more than ${MAX_BODY_DEPTH} deep`]),
    );
    expect((await post(`${'['.repeat(400_000)}${']'.repeat(400_000)}`)).status).toBe(400);
    // Brackets inside strings do not count.
    expect((await post(JSON.stringify({ a: '[{'.repeat(100) }))).status).toBe(200);
    expect((await post(JSON.stringify({ a: '"\\[{'.repeat(100) }))).status).toBe(200);
  });

  it('takes UTF-8 characters beyond the BMP, raw or escaped as a surrogate pair', async () => {
    const raw = await post('{"name":"😀"}');
    expect(await raw.json()).toEqual({ body: { name: '😀' } });
    const escaped = await post('{"name":"\\ud83d\\ude00"}');
    expect(await escaped.json()).toEqual({ body: { name: '😀' } });
  });

  it.each<[string, keyof typeof STATEMENTS, unknown]>([
    ['22001', 'short', 'longer'],
    ['22003', 'amount', '123456'],
    ['22003', 'whole', '2147483648'],
    ['22P02', 'whole', 'twelve'],
    ['22P02', 'document', '"\\ud800"'],
    ['22P05', 'document', '"\\u0000"'],
    ['22007', 'at', 'someday'],
    ['22008', 'at', '2026-13-45'],
    ['22021', 'utf8', 'c328'],
    ['54000', 'indexed', randomBytes(6000).toString('base64')],
    ['54001', 'document', `${'['.repeat(250_000)}${']'.repeat(250_000)}`],
  ])('answers Postgres refusing a value (%s, %s) with a 422, never a 500', async (code, statement, value) => {
    logged.length = 0;
    const response = await post(JSON.stringify({ statement, value }), 'application/json', '/values');
    expect(response.status).toBe(422);
    const { errors } = (await response.json()) as { errors: { base: string[] } };
    expect(errors.base[0]).toMatch(/^A value cannot be stored: /);
    expect(logged).toContainEqual(
      expect.objectContaining({ level: 40, err: expect.objectContaining({ code }) as unknown }),
    );
  });

  describe('a write with an Idempotency-Key (API.md §5)', () => {
    const write = (path: string, key: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${base}${path}`, {
        method: 'POST',
        headers: {
          authorization: 'Bearer 7:write',
          'content-type': 'application/json',
          'idempotency-key': key,
          ...headers,
        },
        body: JSON.stringify(body),
      });
    const written = async (note: string) =>
      (await pool.query('SELECT id FROM http_test_writes WHERE note = $1', [note])).rowCount;

    it('runs once however many requests with the key race, and each gets the first response, headers included', async () => {
      const paths = ['/v2/writes', '/api/v2/writes', '/v2/writes/', '/v2/writes'];
      const responses = await Promise.all(
        Array.from({ length: 8 }, (_, i) => write(paths[i % paths.length]!, 'race-1', { note: 'race' })),
      );
      expect(await written('race')).toBe(1);
      const bodies = await Promise.all(responses.map((response) => response.text()));
      expect(new Set(bodies).size).toBe(1);
      expect(responses.map((response) => response.status)).toEqual(Array(8).fill(201));
      for (const header of ['location', 'etag', 'content-type'])
        expect(new Set(responses.map((response) => response.headers.get(header))).size).toBe(1);
      const replayed = responses.filter((response) => response.headers.get('idempotent-replayed') === 'true');
      expect(replayed).toHaveLength(7);
      const later = await write('/v2/writes', 'race-1', { note: 'race' });
      expect(later.headers.get('idempotent-replayed')).toBe('true');
      expect(later.headers.get('location')).toBe(responses[0]!.headers.get('location'));
      expect(await later.text()).toBe(bodies[0]);
    });

    it('keeps nothing of a write that failed, its recorded answer included: the key serves the next request', async () => {
      expect((await write('/v2/writes', 'failed-1', { note: 'failed', fail: true })).status).toBe(422);
      expect(await written('failed')).toBe(0);
      const corrected = await write('/v2/writes', 'failed-1', { note: 'corrected' });
      expect(corrected.status).toBe(201);
      expect(corrected.headers.get('idempotent-replayed')).toBeNull();
      const other = await write('/v2/writes', 'failed-1', { note: 'another' });
      expect(other.status).toBe(422);
      expect(await other.json()).toEqual(
        envelope(['Idempotency-Key was already used with a different request']),
      );
      expect(await written('another')).toBe(0);
    });

    it('replays the same body with its members in another order, and a key kept by an earlier version', async () => {
      const first = await write('/v2/writes', 'order-1', { note: 'ordered', fail: false });
      expect(first.status).toBe(201);
      // Another JSON serializer on the client's retry: the same body (RFC 8259 §4).
      const again = await write('/v2/writes', 'order-1', { fail: false, note: 'ordered' });
      expect(again.status).toBe(201);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await again.text()).toBe(await first.text());
      expect(await written('ordered')).toBe(1);
      // A key a version before canonical JSON kept: its hash over the body as sent.
      const earlier = createHash('sha256')
        .update(`POST /v2/writes\n${JSON.stringify({ note: 'earlier', fail: false })}`)
        .digest('hex');
      await pool.query(
        `INSERT INTO public.http_test_keys (org_id, key, request_hash, status, headers, body)
         VALUES (7, 'earlier-1', $1, 201, '{}', '{"kept":true}')`,
        [earlier],
      );
      const replayed = await write('/v2/writes', 'earlier-1', { note: 'earlier', fail: false });
      expect(replayed.headers.get('idempotent-replayed')).toBe('true');
      expect(await replayed.text()).toBe('{"kept":true}');
      expect(await written('earlier')).toBe(0);
    });

    it('answers Prefer: respond-async with Preference-Applied, first and replayed', async () => {
      const prefer = { prefer: 'respond-async' };
      const first = await write('/v2/writes', 'prefer-1', { note: 'prefer' }, prefer);
      const again = await write('/v2/writes', 'prefer-1', { note: 'prefer' }, prefer);
      for (const response of [first, again]) {
        expect(response.status).toBe(201);
        expect(response.headers.get('preference-applied')).toBe('respond-async');
      }
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      const plain = await write('/v2/writes', 'prefer-1', { note: 'prefer' });
      expect(plain.headers.get('preference-applied')).toBeNull();
    });

    it('refuses a malformed key, and lets no write answer without recording its response', async () => {
      for (const key of ['é', 'x'.repeat(256), 'tab\tkey']) {
        const refused = await write('/v2/writes', key, { note: 'malformed' });
        expect(refused.status).toBe(400);
        expect(await refused.json()).toMatchObject({
          errors: { 'Idempotency-Key': ['must be 1 to 255 printable ASCII characters'] },
        });
      }
      expect(await written('malformed')).toBe(0);
      logged.length = 0;
      expect((await write('/v2/forgetful', 'forgot-1', {})).status).toBe(500);
      expect(logged).toContainEqual(expect.objectContaining({ level: 50 }));
      const withoutKey = await fetch(`${base}/v2/forgetful`, {
        method: 'POST',
        headers: { authorization: 'Bearer 7:write', 'content-type': 'application/json' },
        body: '{}',
      });
      expect(withoutKey.status).toBe(201);
    });
  });

  it('refuses a query parameter the operation does not take, naming it and pointing at q', async () => {
    const auth = { authorization: 'Bearer 1:read' };
    const response = await fetch(`${base}/v2/things?limit=5`, { headers: auth });
    expect(response.status).toBe(400);
    const { errors } = (await response.json()) as { errors: Record<string, string[]> };
    expect(errors.limit![0]).toContain('in q');
    expect((await fetch(`${base}/v2/things?q=a&q=b`, { headers: auth })).status).toBe(400);
    expect(await (await fetch(`${base}/v2/things?q=x`, { headers: auth })).json()).toEqual({ q: 'x' });
  });

  it('checks access, then scope: a 403 with the RFC 6750 challenge naming the first scope the operation takes', async () => {
    expect((await fetch(`${base}/v2/things`)).status).toBe(401);
    const refused = await fetch(`${base}/v2/things/7`, {
      method: 'DELETE',
      headers: { authorization: 'Bearer 1:read' },
    });
    expect(refused.status).toBe(403);
    expect(refused.headers.get('www-authenticate')).toBe(
      'Bearer error="insufficient_scope", error_description="The access token lacks the write scope", scope="write"',
    );
    expect(refused.headers.get('ratelimit-remaining')).toBe('9');
    const operator = await fetch(`${base}/v2/things/7`, {
      method: 'DELETE',
      headers: { authorization: 'Bearer 1:operations' },
    });
    expect(await operator.json()).toEqual({ id: '7' });
  });

  it('checks credentials and scope before the query and the body: 401, then 403, then 400, 413 or 415', async () => {
    const writeAs = (authorization: string | undefined, type: string, body: string) =>
      fetch(`${base}/v2/writes`, {
        method: 'POST',
        headers: { 'content-type': type, ...(authorization === undefined ? {} : { authorization }) },
        body,
      });
    const unauthenticated = await writeAs(undefined, 'text/plain', '{');
    expect(unauthenticated.status).toBe(401);
    expect(await unauthenticated.json()).toEqual(envelope(['An access token is required']));
    expect((await writeAs(undefined, 'application/json', '{')).status).toBe(401);
    expect((await writeAs(undefined, 'application/json', 'x'.repeat(MAX_BODY_BYTES + 1))).status).toBe(401);
    expect((await fetch(`${base}/v2/things?limit=5`)).status).toBe(401);
    // A token without the scope: a 403, whatever is wrong with the request besides.
    expect((await writeAs('Bearer 1:read', 'text/plain', '{')).status).toBe(403);
    expect(
      (await fetch(`${base}/v2/things?limit=5`, { headers: { authorization: 'Bearer 1:write' } })).status,
    ).toBe(403);
    // Admitted: the request itself is checked, and the answer carries the client's bucket.
    const unsupported = await writeAs('Bearer 1:write', 'text/plain', '{');
    expect(unsupported.status).toBe(415);
    expect(unsupported.headers.get('ratelimit-remaining')).toBe('9');
    expect((await writeAs('Bearer 1:write', 'application/json', '{')).status).toBe(400);
  });

  it('maps domain errors to their status, hides unexpected ones, and 503s when a dependency is down', async () => {
    expect((await fetch(`${base}/conflict`)).status).toBe(409);
    const boom = await fetch(`${base}/boom`, { headers: { 'x-request-id': 'req-42' } });
    expect(boom.status).toBe(500);
    const text = await boom.text();
    expect(JSON.parse(text)).toEqual(envelope(['Internal error (request req-42)']));
    expect(text).not.toContain('passwd');
    const down = await fetch(`${base}/db-down`);
    expect(down.status).toBe(503);
    expect(down.headers.get('retry-after')).toBe('1');
  });

  it('writes one access-log line per request, with its route template, status, organization and client', async () => {
    logged.length = 0;
    await fetch(`${base}/v2/things/12`, {
      method: 'DELETE',
      headers: { authorization: 'Bearer 3:write', 'x-request-id': 'req-log' },
    });
    expect(logged.filter((line) => line.msg === 'request')).toEqual([
      expect.objectContaining({
        request_id: 'req-log',
        method: 'DELETE',
        route: '/v2/things/{id}',
        status: 200,
        organization: 3,
        client: 'client-3',
        ms: expect.any(Number) as unknown,
      }),
    ]);
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

  it('keeps /livez up and /readyz at 503 with Retry-After until ready, and serves Prometheus metrics by route template', async () => {
    expect((await fetch(`${base}/livez`)).status).toBe(200);
    const notReady = await fetch(`${base}/readyz`);
    expect(notReady.status).toBe(503);
    expect(notReady.headers.get('retry-after')).toBe('1');
    ready = true;
    expect((await fetch(`${base}/readyz`)).status).toBe(200);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(metrics).toMatch(
      /http_request_duration_seconds_count\{service="http-test",method="GET",route="\/conflict",status="409"\} 1/,
    );
    expect(metrics).toContain('route="/v2/things/{id}"');
    expect(metrics).toContain('process_cpu_user_seconds_total');
  });
});

describe("the HTTP pipeline's database deadline", () => {
  let server: Server;
  let base: string;
  let pool: Pool;
  beforeAll(async () => {
    pool = createPool({ connectionString: process.env.DATABASE_URL!, applicationName: 'http-test', max: 2 });
    const sqlState = (code: string) => () => Promise.reject(Object.assign(new Error(code), { code }));
    const app = createHttpApp({
      logger: pino({ level: 'silent' }),
      metrics: createMetricsRegistry('http-deadline-test'),
      ready: () => true,
      databaseDeadlineMs: 300,
      routes: [
        route('GET', '/slow', async () => {
          await pool.query('SELECT pg_sleep(2)');
          return jsonReply(200, {});
        }),
        route('GET', '/statement-timeout', sqlState('57014')),
        route('GET', '/lock-timeout', sqlState('55P03')),
      ],
    });
    const listening = await listen(app, 0, '127.0.0.1');
    server = listening.server;
    base = `http://127.0.0.1:${listening.port}`;
  });
  afterAll(async () => {
    await closeServer(server);
    await pool.end();
  });

  it('answers 503 with Retry-After once a statement passes the deadline, instead of waiting for it', async () => {
    const begun = Date.now();
    const response = await fetch(`${base}/slow`);
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('1');
    expect(Date.now() - begun).toBeLessThan(1_500);
  });

  it('answers a statement or lock wait that the server timed out with 503, never a 500', async () => {
    for (const path of ['/statement-timeout', '/lock-timeout']) {
      const response = await fetch(`${base}${path}`);
      expect({ path, status: response.status }).toEqual({ path, status: 503 });
    }
  });
});
