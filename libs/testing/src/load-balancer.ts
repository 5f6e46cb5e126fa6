import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { freePort } from './ports.js';

export interface LoadBalancer {
  readonly url: string;
  close(): Promise<void>;
}

/** How often each upstream's `/readyz` is asked, and how long an answer may take. */
const PROBE_INTERVAL_MS = 500;
const PROBE_TIMEOUT_MS = 1_000;

/**
 * A round-robin TCP load balancer on loopback in front of the replicas of one service, as a
 * Kubernetes Service is: each new connection goes to the next upstream whose readiness probe passed
 * (`GET /readyz`, every 500 ms), or to any upstream when none did; an upstream that refuses the
 * connection is skipped for the next one. A replica that hangs (SIGSTOP) keeps the connections it
 * already has until its probe fails, as behind a real Service.
 */
export async function startLoadBalancer(upstreams: readonly string[]): Promise<LoadBalancer> {
  const targets = upstreams.map((url) => ({ url: new URL(url), ready: true }));
  let next = 0;
  let closed = false;
  const sockets = new Set<Socket>();

  const probe = async (): Promise<void> => {
    await Promise.all(
      targets.map(async (target) => {
        try {
          const response = await fetch(new URL('/readyz', target.url), {
            signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
          });
          await response.arrayBuffer();
          target.ready = response.ok;
        } catch {
          target.ready = false;
        }
      }),
    );
  };
  const probing = setInterval(() => void probe(), PROBE_INTERVAL_MS);
  probing.unref();

  /** The upstreams to try for a new connection, in order: the ready ones from the next in turn, then the rest. */
  const order = (): typeof targets => {
    const start = next++ % targets.length;
    const turn = [...targets.slice(start), ...targets.slice(0, start)];
    return [...turn.filter((t) => t.ready), ...turn.filter((t) => !t.ready)];
  };

  const connect = (client: Socket, candidates: typeof targets): void => {
    const target = candidates[0];
    if (!target || closed) {
      client.destroy();
      return;
    }
    const upstream = createConnection({ host: target.url.hostname, port: Number(target.url.port) });
    let connected = false;
    upstream.on('error', () => {
      // Refused (a replica that is down): the next one. Once relaying, an error ends both sides.
      if (connected) client.destroy();
      else connect(client, candidates.slice(1));
    });
    upstream.once('connect', () => {
      connected = true;
      sockets.add(upstream);
      client.pipe(upstream).pipe(client);
      client.resume();
      client.once('close', () => upstream.destroy());
      upstream.once('close', () => {
        sockets.delete(upstream);
        client.destroy();
      });
    });
  };

  const server: Server = createServer({ pauseOnConnect: true }, (client) => {
    sockets.add(client);
    client.once('close', () => sockets.delete(client));
    client.on('error', () => {});
    connect(client, order());
  });
  const port = await freePort();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return {
    url: `http://localhost:${port}`,
    async close() {
      closed = true;
      clearInterval(probing);
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
