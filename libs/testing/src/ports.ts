import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/**
 * Below the kernel's ephemeral range, from which every outgoing connection takes its local port: a
 * test server that is stopped and started again on its port (a killed Postgres, a restarted broker)
 * would otherwise find it taken by some client connection in the meantime.
 */
const EPHEMERAL_LOW = ((): number => {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
  } catch {
    return 32_768;
  }
})();
const FIRST = 10_000;

/** Whether `port` (0: any the kernel picks) can be listened on at 127.0.0.1; the port if so. */
function tryListen(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : undefined));
    });
  });
}

/** A TCP port on the loopback interface that was free a moment ago, outside the ephemeral range. */
export async function freePort(): Promise<number> {
  for (let attempt = 0; EPHEMERAL_LOW - FIRST > 1_000 && attempt < 50; attempt++) {
    const port = await tryListen(FIRST + Math.floor(Math.random() * (EPHEMERAL_LOW - FIRST)));
    if (port !== undefined) return port;
  }
  const port = await tryListen(0);
  if (port === undefined) throw new Error('no free port on 127.0.0.1');
  return port;
}
