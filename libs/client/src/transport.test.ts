import { platformFetch, type TransportOptions } from './transport.js';
import type { TokenSource } from './tokens.js';

/** A scripted server: each try gets the next answer (a status and headers, or a network error). */
function server(answers: readonly (Response | Error)[]) {
  const requests: { method: string; headers: Headers; body: string }[] = [];
  const fetch = async (request: Request): Promise<Response> => {
    requests.push({ method: request.method, headers: request.headers, body: await request.text() });
    const answer = answers[requests.length - 1];
    if (answer === undefined) throw new Error('more tries than scripted');
    if (answer instanceof Error) throw answer;
    return answer;
  };
  return { fetch, requests };
}

const waits: number[] = [];
const options = (
  fetch: (request: Request) => Promise<Response>,
  more: Pick<TransportOptions, 'retry' | 'tokens'> = {},
): TransportOptions => ({
  fetch,
  sleep: (ms) => {
    waits.push(ms);
    return Promise.resolve();
  },
  random: () => 0.5,
  ...more,
});

const post = () =>
  new Request('http://platform.test/v2/people', {
    method: 'POST',
    body: '{"last_name":"Lovelace"}',
    headers: { 'content-type': 'application/json' },
  });

describe('platformFetch: retries, idempotency keys and tokens', () => {
  beforeEach(() => waits.splice(0));

  it('retries a write after 429 and 503 with the same Idempotency-Key and body, waiting what Retry-After says', async () => {
    const { fetch, requests } = server([
      new Response('{}', { status: 429, headers: { 'retry-after': '2' } }),
      new Response('{}', { status: 503, headers: { 'retry-after': 'Thu, 01 Jan 1970 00:00:00 GMT' } }),
      new Response('{"count":1}', { status: 201 }),
    ]);
    const response = await platformFetch(options(fetch))(post());
    expect(response.status).toBe(201);
    expect(waits).toEqual([2000, 0]);
    const keys = requests.map(({ headers }) => headers.get('idempotency-key'));
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(keys).size).toBe(1);
    expect(requests.map(({ body }) => body)).toEqual(Array(3).fill('{"last_name":"Lovelace"}'));
  });

  it('keeps an Idempotency-Key the caller gave, and gives none to a read', async () => {
    const { fetch, requests } = server([new Response('{}'), new Response('{}')]);
    const send = platformFetch(options(fetch));
    const keyed = post();
    keyed.headers.set('Idempotency-Key', 'order-SO-1042');
    await send(keyed);
    await send(new Request('http://platform.test/v2/people'));
    expect(requests.map(({ headers }) => headers.get('idempotency-key'))).toEqual(['order-SO-1042', null]);
  });

  it('retries network errors with an exponential backoff, and gives up after maxAttempts', async () => {
    const refused = new TypeError('fetch failed');
    const { fetch, requests } = server([refused, refused, refused]);
    await expect(
      platformFetch(options(fetch, { retry: { maxAttempts: 3, baseDelayMs: 100 } }))(post()),
    ).rejects.toBe(refused);
    expect(requests).toHaveLength(3);
    // Full jitter (random 0.5) of 100, then 200 ms.
    expect(waits).toEqual([50, 100]);
  });

  it('answers a Retry-After beyond maxDelayMs at once, for the caller to see', async () => {
    const { fetch, requests } = server([
      new Response('{}', { status: 503, headers: { 'retry-after': '3600' } }),
    ]);
    const response = await platformFetch(options(fetch))(post());
    expect(response.status).toBe(503);
    expect(requests).toHaveLength(1);
  });

  it('does not retry what a retry cannot change (400, 409, 422, 500)', async () => {
    for (const status of [400, 409, 422, 500]) {
      const { fetch, requests } = server([new Response('{}', { status })]);
      expect((await platformFetch(options(fetch))(post())).status).toBe(status);
      expect(requests).toHaveLength(1);
    }
  });

  it('takes a new token once when the platform says the token is invalid, and sends it', async () => {
    const issued = ['first', 'second'];
    const invalidated: string[] = [];
    let current = issued.shift()!;
    const tokens: TokenSource = {
      accessToken: () => Promise.resolve(current),
      invalidate: (token) => {
        invalidated.push(token);
        current = issued.shift() ?? current;
      },
    };
    const challenge = 'Bearer error="invalid_token", error_description="The access token was revoked"';
    const { fetch, requests } = server([
      new Response('{}', { status: 401, headers: { 'www-authenticate': challenge } }),
      new Response('{}', { status: 401, headers: { 'www-authenticate': challenge } }),
    ]);
    const response = await platformFetch(options(fetch, { tokens }))(post());
    // One renewal only: a token refused twice is the answer.
    expect(response.status).toBe(401);
    expect(invalidated).toEqual(['first']);
    expect(requests.map(({ headers }) => headers.get('authorization'))).toEqual([
      'Bearer first',
      'Bearer second',
    ]);
  });
});
