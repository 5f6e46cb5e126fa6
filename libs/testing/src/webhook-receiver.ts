import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/** A delivery body (API.md §8). */
export interface WebhookPayload {
  readonly id: string;
  readonly type: string;
  readonly timestamp: string;
  readonly sequence: number;
  readonly data: Record<string, unknown>;
  readonly previous_attributes: Record<string, unknown>;
}

/** One request the receiver got, and what it made of it. */
export interface ReceivedWebhook {
  /** `webhook-id`: the event id, the same on every attempt. */
  readonly id: string;
  readonly timestamp: string;
  readonly signature: string;
  /** The W3C trace context the delivery carried (API.md §8), when it carried one. */
  readonly traceparent: string | undefined;
  readonly body: string;
  /** Whether one of the secrets verified it with the `standardwebhooks` library. */
  readonly verified: boolean;
  /** The body, when verified. */
  readonly payload: WebhookPayload | undefined;
  /** By the receiver's clock. */
  readonly receivedAt: Date;
}

/** The receiver's answer to a verified delivery; unverified ones get a 400, as a subscriber should answer. */
export interface WebhookAnswer {
  readonly status: number;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string;
  /** Wait this long before answering (to keep requests in flight). */
  readonly delayMs?: number;
}

export interface WebhookReceiverOptions {
  /** The endpoint's secrets, read at each request (a rotation changes them): any one may verify. */
  readonly secrets: () => readonly string[];
  /** The answer to each verified delivery; 204 when left out. Can be changed with `answerWith`. */
  readonly answer?: (delivery: ReceivedWebhook) => WebhookAnswer;
  /** The clock `webhook-timestamp` is checked against: the sender's injected clock, when it has one. */
  readonly clock?: () => Date;
  /** Listen on this port of 127.0.0.1 (a receiver brought back up at the same URL); a free one when left out. */
  readonly port?: number;
}

export interface WebhookReceiver {
  readonly url: string;
  readonly port: number;
  /** Every request, in arrival order. */
  readonly received: readonly ReceivedWebhook[];
  /** TCP connections accepted so far. */
  connections(): number;
  /** Requests received and not answered yet. */
  inFlight(): number;
  answerWith(answer: (delivery: ReceivedWebhook) => WebhookAnswer): void;
  /** Resolves once `predicate` holds for what was received; rejects after `timeoutMs`. */
  waitFor(predicate: (received: readonly ReceivedWebhook[]) => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * A webhook subscriber on loopback that verifies every delivery the way a subscriber would, with the
 * `standardwebhooks` library and the endpoint's secret, and records it.
 */
export async function startWebhookReceiver(options: WebhookReceiverOptions): Promise<WebhookReceiver> {
  const received: ReceivedWebhook[] = [];
  const clock = options.clock ?? (() => new Date());
  let answer: (delivery: ReceivedWebhook) => WebhookAnswer = options.answer ?? (() => ({ status: 204 }));
  let connections = 0;
  let inFlight = 0;
  const delays = new Set<NodeJS.Timeout>();

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    const header = (name: string): string => {
      const value = req.headers[name];
      return typeof value === 'string' ? value : '';
    };
    const headers = {
      'webhook-id': header('webhook-id'),
      'webhook-timestamp': header('webhook-timestamp'),
      'webhook-signature': header('webhook-signature'),
    };
    const payload = verify(options.secrets(), body, headers, clock());
    const delivery: ReceivedWebhook = {
      id: headers['webhook-id'],
      timestamp: headers['webhook-timestamp'],
      signature: headers['webhook-signature'],
      traceparent: header('traceparent') || undefined,
      body,
      verified: payload !== undefined,
      payload,
      receivedAt: clock(),
    };
    received.push(delivery);
    const reply: WebhookAnswer =
      payload === undefined ? { status: 400, body: 'signature verification failed' } : answer(delivery);
    if (reply.delayMs !== undefined) {
      await new Promise<void>((resolve) => {
        const delay = setTimeout(() => {
          delays.delete(delay);
          resolve();
        }, reply.delayMs);
        delays.add(delay);
      });
    }
    res.writeHead(reply.status, reply.headers);
    res.end(reply.body);
  };

  const server = createServer((req, res) => {
    inFlight++;
    handle(req, res)
      .catch(() => res.destroy())
      .finally(() => inFlight--);
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    port,
    received,
    connections: () => connections,
    inFlight: () => inFlight,
    answerWith(next) {
      answer = next;
    },
    async waitFor(predicate, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      while (!predicate(received)) {
        if (Date.now() > deadline)
          throw new Error(
            `webhook receiver: condition not met within ${timeoutMs} ms (${received.length} received)`,
          );
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    },
    async close() {
      for (const delay of delays) clearTimeout(delay);
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await closed;
    },
  };
}

/**
 * The verified payload, or undefined. The library checks `webhook-timestamp` against `Date.now()`
 * (5 minutes' tolerance); verifying "as of" `at` lets a test with a manual clock verify deliveries
 * stamped by that clock. `verify` is synchronous, so nothing else runs while `Date.now` is swapped.
 */
function verify(
  secrets: readonly string[],
  body: string,
  headers: Record<string, string>,
  at: Date,
): WebhookPayload | undefined {
  const now = Date.now;
  Date.now = () => at.getTime();
  try {
    for (const secret of secrets) {
      try {
        return new Webhook(secret).verify(body, headers) as WebhookPayload;
      } catch {
        // Another secret may verify it (a rotation); none does: unverified.
      }
    }
    return undefined;
  } finally {
    Date.now = now;
  }
}
