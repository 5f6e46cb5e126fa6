import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { checkInternalErrors, retryCauses } from './checks.js';
import { ChaosClient, RawBody, emptyTally, type HostileTally } from './workload.js';

/**
 * An authorization server and an api in one: tokens for anyone, and `POST /v2/people` answered
 * with the statuses of `answers` in turn (then 201), each with a request id of its own.
 */
async function platform(
  answers: { status: number; body: string }[],
): Promise<{ url: string; server: Server }> {
  let request = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url === '/oauth/token') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ access_token: 'token', token_type: 'Bearer', expires_in: 3600 }));
        return;
      }
      const answer = answers[request] ?? {
        status: 201,
        body: JSON.stringify({ results: { id: 7, version: 1 }, errors: [] }),
      };
      res.writeHead(answer.status, {
        'content-type': 'application/json',
        'x-request-id': `request-${++request}`,
      });
      res.end(answer.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

const internal = {
  status: 500,
  body: JSON.stringify({ results: null, errors: [{ code: 'internal_error' }] }),
};
const unavailable = {
  status: 503,
  body: JSON.stringify({ count: 0, results: null, errors: { base: ['Postgres is away'] } }),
};

describe('a 500 in the chaos run', () => {
  let server: Server | undefined;
  afterEach(() => server?.close());

  const send = async (answers: { status: number; body: string }[], body: unknown) => {
    const started = await platform(answers);
    server = started.server;
    const client = new ChaosClient(
      { auth: started.url, api: started.url },
      { clientId: 'chaos', clientSecret: 'secret' },
    );
    const tally = emptyTally();
    const answer = await client.send(tally, 'POST', '/v2/people', body, 'key');
    return { tally, answer };
  };
  const hostile = (): HostileTally => ({ tally: emptyTally(), statuses: new Map(), unanswered: [] });

  it('fails its check, named, even when the request sent again was answered', async () => {
    const { tally, answer } = await send([internal, { status: 500, body: 'Internal Server Error' }], {
      last_name: 'Ada',
    });
    expect(answer?.status).toBe(201);
    expect(tally.retries).toBe(2);
    const check = checkInternalErrors(tally, hostile());
    expect(check.failures).toEqual({ writers: 2, hostile: 0 });
    expect(check.examples).toEqual([
      { request: 'POST /v2/people {"last_name":"Ada"}', requestId: 'request-1', answer: internal.body },
      // Not the envelope: a 500 all the same.
      {
        request: 'POST /v2/people {"last_name":"Ada"}',
        requestId: 'request-2',
        answer: 'Internal Server Error',
      },
    ]);
  });

  it("counts the hostile writer's apart, its raw body named", async () => {
    const { tally } = await send([internal], new RawBody('{"last_name": "\\ud800"}'));
    const check = checkInternalErrors(emptyTally(), { ...hostile(), tally });
    expect(check.failures).toEqual({ writers: 0, hostile: 1 });
    expect(check.examples).toEqual([
      {
        hostile: {
          request: 'POST /v2/people {"last_name": "\\ud800"}',
          requestId: 'request-1',
          answer: internal.body,
        },
      },
    ]);
  });

  it('passes on a dependency that is away (503), sent again until answered', async () => {
    const { tally, answer } = await send([unavailable, unavailable], { last_name: 'Ada' });
    expect(answer?.status).toBe(201);
    expect(tally.retries).toBe(2);
    expect(checkInternalErrors(tally, hostile()).failures).toEqual({ writers: 0, hostile: 0 });
  });

  it('says why attempts were sent again, and when', async () => {
    const { tally } = await send(
      [unavailable, unavailable, { status: 429, body: '{"results":null,"errors":[]}' }],
      { last_name: 'Ada' },
    );
    expect(retryCauses(tally)).toEqual({
      retriedBecause: {
        '503 Postgres is away': expect.stringMatching(/^2x \d\d:\d\d:\d\d-\d\d:\d\d:\d\d$/) as string,
        '429 (no message)': expect.stringMatching(/^1x /) as string,
      },
    });
  });
});
