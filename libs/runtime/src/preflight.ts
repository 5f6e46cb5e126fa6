import { constants } from 'node:fs';
import { access, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import { dirname, resolve } from 'node:path';
import pg from 'pg';

/**
 * A start-up failure that a person caused and can fix: its message is one line that names the
 * cause and the setting to change, printed as it is (no stack trace) before the process exits 1.
 */
export class StartupError extends Error {
  override readonly name = 'StartupError';
}

/** Prints a {@link StartupError} as its one line and exits 1; any other error is rethrown. */
export function exitOnStartupError(error: unknown): never {
  if (!(error instanceof StartupError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
}

/** Refuses a port that another process listens on (or that this user may not bind), before anything is created. */
export async function checkPortFree(setting: string, port: number, host?: string): Promise<void> {
  if (port === 0) return;
  const server = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port, host, exclusive: true }, resolve);
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const where = `${host ?? '*'}:${port}`;
    if (code === 'EADDRINUSE') {
      throw new StartupError(
        `${setting}=${port}: the port is already in use (${where}); stop what listens there or set ${setting} to a free port`,
      );
    }
    if (code === 'EACCES') {
      throw new StartupError(
        `${setting}=${port}: this user may not listen on ${where}; set ${setting} to a port above 1023`,
      );
    }
    if (code === 'EADDRNOTAVAIL') {
      throw new StartupError(`${setting}=${port}: ${host} is not an address of this machine (HOST)`);
    }
    throw error;
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

/**
 * Refuses a directory this process cannot write (read-only file system, another user's folder), or
 * that would have to be created where it cannot be: checks the nearest existing ancestor.
 */
export async function checkWritableDirectory(setting: string, directory: string): Promise<void> {
  let path = resolve(directory);
  for (;;) {
    const found = await stat(path).catch(() => undefined);
    if (found) {
      if (!found.isDirectory()) {
        throw new StartupError(
          `${setting}=${directory}: ${path} is not a directory; set ${setting} to a folder`,
        );
      }
      try {
        await access(path, constants.W_OK | constants.X_OK);
        return;
      } catch (error) {
        throw new StartupError(
          `${setting}=${directory}: cannot write in ${path} (${(error as NodeJS.ErrnoException).code}); set ${setting} to a folder this user can write`,
        );
      }
    }
    if (dirname(path) === path) return;
    path = dirname(path);
  }
}

/**
 * Connects once to the database a URL names (5 s at most) and refuses it with the host and the
 * error: refused, unknown host, wrong password, no such database.
 */
export async function checkDatabaseReachable(setting: string, url: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (error) {
    throw new StartupError(
      `${setting}: cannot use the database at ${describeDatabase(url)}: ${describeError(error)}`,
    );
  } finally {
    await client.end().catch(() => {});
  }
}

/** `user@host:port/database` of a connection string, without its password. */
export function describeDatabase(url: string): string {
  try {
    const parsed = new URL(url);
    const user = parsed.username ? `${decodeURIComponent(parsed.username)}@` : '';
    return `${user}${parsed.hostname || 'localhost'}:${parsed.port || '5432'}${parsed.pathname}`;
  } catch {
    return '(an unparsable URL)';
  }
}

/**
 * What went wrong, as a person reads it: the innermost cause of a failed connection
 * (`ECONNREFUSED 127.0.0.1:8081` rather than `fetch failed`), or a Postgres error with its SQLSTATE.
 */
export function describeError(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; depth < 5 && current !== undefined && current !== null; depth++) {
    const e = current as {
      message?: unknown;
      code?: unknown;
      address?: unknown;
      port?: unknown;
      errors?: unknown;
      cause?: unknown;
    };
    // Node reports a refused dual-stack connection as an AggregateError of one error per address.
    if (Array.isArray(e.errors) && e.errors.length > 0) {
      parts.push(e.errors.map((inner) => describeError(inner)).join('; '));
      break;
    }
    if (typeof e.code === 'string' && typeof e.address === 'string') {
      parts.push(`${e.code} ${e.address}${typeof e.port === 'number' ? `:${e.port}` : ''}`);
      break;
    }
    const message = typeof e.message === 'string' && e.message !== '' ? e.message : JSON.stringify(current);
    const sqlState =
      typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) ? ` (SQLSTATE ${e.code})` : '';
    if (e.cause === undefined || e.cause === null) {
      parts.push(`${message}${sqlState}`);
      break;
    }
    // A wrapper's message ("fetch failed") says less than its cause: keep the cause only.
    current = e.cause;
  }
  return parts.join(': ');
}
