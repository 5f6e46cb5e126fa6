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

/**
 * jest runs two test files at a time (jest.config.js), in worker processes numbered from 1
 * (JEST_WORKER_ID), each with its own {@link given}: each worker draws from a part of its own, so that
 * two files running side by side are never given one port. Up to four parts; one range outside jest.
 */
const [LOW, HIGH] = ((): [number, number] => {
  const worker = Number(process.env.JEST_WORKER_ID);
  if (!Number.isInteger(worker) || worker < 1) return [FIRST, EPHEMERAL_LOW];
  const part = Math.floor((EPHEMERAL_LOW - FIRST) / 4);
  const low = FIRST + ((worker - 1) % 4) * part;
  return [low, low + part];
})();

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

/**
 * Every port this process handed out. A port is only free until someone listens on it, and a caller
 * often listens much later (a replica's port is chosen before the platform starts, a proxy's while it
 * runs): drawn again meanwhile, two of a run's servers were given one port (a chaos run's start failed
 * on `PORT=11609: the port is already in use`; about 60 ports drawn from 22,000 meet about once in 13
 * runs).
 */
const given = new Set<number>();

/**
 * A TCP port on the loopback interface that was free a moment ago, outside the ephemeral range and in
 * this jest worker's part of it, and that this process has not handed out before.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; HIGH - LOW > 1_000 && attempt < 50; attempt++) {
    const drawn = LOW + Math.floor(Math.random() * (HIGH - LOW));
    const port = given.has(drawn) ? undefined : await tryListen(drawn);
    if (port !== undefined) return handOut(port);
  }
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = await tryListen(0);
    if (port !== undefined && !given.has(port)) return handOut(port);
  }
  throw new Error('no free port on 127.0.0.1');
}

function handOut(port: number): number {
  given.add(port);
  return port;
}
