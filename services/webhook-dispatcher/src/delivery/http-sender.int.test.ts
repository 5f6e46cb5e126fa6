// @runs-alone: a hung endpoint given up within its timeout plus 1 s, timed
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AddressGuard, systemResolver } from './address-guard.js';
import { HttpSender } from './http-sender.js';

// Long enough for the receiver, in this process, to send its headers on a loaded machine: a 400 ms
// timeout once fired before they came, under a load of 58.
const REQUEST_TIMEOUT_MS = 2_000;

describe('HttpSender against a receiver that answers, then drips its body', () => {
  let server: Server;
  let url: string;
  let sender: HttpSender;
  const dripping = new Set<ServerResponse>();

  beforeAll(async () => {
    // Headers at once, then a byte every 50 ms: no gap reaches undici's body timeout, only the
    // deadline over the whole request ends it.
    server = createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/plain' });
      dripping.add(res);
      const drip = setInterval(() => res.write('.'), 50);
      res.on('close', () => {
        clearInterval(drip);
        dripping.delete(res);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
    sender = new HttpSender({
      guard: new AddressGuard({ allowPrivateTargets: true, allowedNetworks: [] }),
      resolve: systemResolver,
      clock: () => new Date(),
      connectTimeoutMs: 1_000,
      requestTimeoutMs: REQUEST_TIMEOUT_MS,
      connectionsPerOrigin: 8,
      maxExcerptBytes: 1_024,
    });
  });

  afterAll(async () => {
    await sender.close();
    for (const res of dripping) res.destroy();
    await new Promise((resolve) => server.close(resolve));
  });

  it('ends every request at the whole-request deadline, keeping the status and losing the excerpt', async () => {
    const began = Date.now();
    const attempts = await Promise.all(
      Array.from({ length: 5 }, (_, n) =>
        sender.deliver({ url, eventId: `event-${n}`, payload: '{}', secrets: ['whsec_c2VjcmV0'] }),
      ),
    );
    const elapsed = Date.now() - began;
    for (const attempt of attempts) {
      expect(attempt).toMatchObject({ statusCode: 200, errorKind: null, responseExcerpt: null });
      // Requests started together share a deadline: none outlives the timeout, none is cut much short.
      expect(attempt.durationMs).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
    }
    expect(elapsed).toBeLessThan(REQUEST_TIMEOUT_MS + 1_000);
  }, 15_000);
});
