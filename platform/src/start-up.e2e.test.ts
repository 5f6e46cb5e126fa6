// @runs-alone: counts the Postgres clusters in /var/lib/ofp around starts, to which another file's instance would add
import { existsSync } from 'node:fs';
import { lstat, mkdtemp, readdir, readFile, readlink, realpath, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SYSTEM_STATE_DIR, processExists } from '@ofp/standalone';
import {
  CACHE_DIR,
  copyWorkspace,
  freePort,
  runCommand,
  runToExit,
  startStandalone,
  type StandaloneProcess,
} from '@ofp/testing';

const asRoot = process.getuid?.() === 0;
const CLUSTERS = join(SYSTEM_STATE_DIR, 'postgres');

/** The demo client the banner shows. */
function bannerClient(stderr: string): { clientId: string; clientSecret: string } {
  const clientId = /^ {2}client_id: +(\S+)$/m.exec(stderr)?.[1];
  const clientSecret = /^ {2}client_secret: +(\S+)$/m.exec(stderr)?.[1];
  if (!clientId || !clientSecret) throw new Error(`no banner in:\n${stderr}`);
  return { clientId, clientSecret };
}

/** The pid of the postmaster running a DATA_DIR's cluster. */
async function postmasterPid(dataDir: string): Promise<number> {
  return Number((await readFile(join(dataDir, 'postgres', 'postmaster.pid'), 'utf8')).split('\n')[0]);
}

/** Removes a test's DATA_DIR, and the cluster it links to in /var/lib/ofp. */
async function removeDataDir(dataDir: string): Promise<void> {
  const link = join(dataDir, 'postgres');
  const relocated = (await lstat(link).catch(() => undefined))?.isSymbolicLink();
  if (relocated) await rm(await realpath(link), { recursive: true, force: true });
  await rm(dataDir, { recursive: true, force: true });
}

const clusters = async (): Promise<string[]> => (await readdir(CLUSTERS).catch(() => [])).sort();

describe('the quick start from a folder only its owner may enter, on a path with a space', () => {
  let top: string;
  let clone: string;
  let instance: StandaloneProcess | undefined;
  const dataDir = (): string => join(clone, '.data');
  const orderctl = (...argv: string[]) =>
    runCommand([process.execPath, 'services/auth/dist/cli/orderctl.js', ...argv], { cwd: clone });

  beforeAll(async () => {
    // mkdtemp makes it 0700, as /root is and as CI may clone under.
    top = await mkdtemp(join(CACHE_DIR, 'start-anywhere-'));
    clone = join(top, 'my clone');
    await copyWorkspace(clone);
  }, 120_000);
  afterAll(async () => {
    await instance?.stop();
    await removeDataDir(dataDir());
    await rm(top, { recursive: true, force: true });
  }, 60_000);

  it('npm start says that it builds, starts, and prints the banner apart from JSON logs', async () => {
    instance = await startStandalone({ command: ['npm', 'start'], cwd: clone });
    const { stdout, stderr } = instance.output();
    expect(stderr).toContain('Building (tsc -b)...');
    expect(stderr).toContain(`Order-fulfillment platform (standalone) listening on http://localhost:`);
    bannerClient(stderr);
    // Not a terminal: stdout is npm's own header and one JSON object per line.
    for (const line of stdout.split('\n').filter((l) => l !== '' && !l.startsWith('> '))) {
      expect(() => JSON.parse(line) as unknown).not.toThrow();
    }
    expect((await stat(top)).mode & 0o777).toBe(0o700);
    const link = await lstat(join(dataDir(), 'postgres'));
    const executable = await readlink(`/proc/${await postmasterPid(dataDir())}/exe`);
    if (asRoot) {
      // User postgres cannot enter `top`: the cluster and the binaries it runs are in /var/lib/ofp.
      expect(link.isSymbolicLink()).toBe(true);
      expect(await realpath(join(dataDir(), 'postgres'))).toMatch(new RegExp(`^${CLUSTERS}/`));
      expect(executable).toMatch(new RegExp(`^${SYSTEM_STATE_DIR}/postgresql-[^/]+/bin/postgres$`));
      expect(stderr).toMatch(
        /^ {2}postgres: +\/var\/lib\/ofp\/postgres\/\S+ \(linked from DATA_DIR\/postgres\)$/m,
      );
    } else {
      expect(link.isDirectory()).toBe(true);
      expect(executable.startsWith(clone)).toBe(true);
    }
  }, 120_000);

  it('refuses a second start on the same DATA_DIR with one line, and the first one runs on', async () => {
    const postmaster = await postmasterPid(dataDir());
    const second = await runToExit({ cwd: clone });
    expect(second.code).toBe(1);
    expect(second.stderr).toMatch(
      /^DATA_DIR=\.\/\.data: an instance is already running on it \(process \d+, http:\/\/127\.0\.0\.1:\d+\); stop it first, or set DATA_DIR to another folder to run a second one\n$/,
    );
    expect(second.stdout).toBe('');
    expect((await fetch(`${instance!.url}/readyz`)).status).toBe(200);
    expect(await postmasterPid(dataDir())).toBe(postmaster);
    expect(() => process.kill(postmaster, 0)).not.toThrow();
  }, 120_000);

  it('orderctl and rebuild-projections find the instance with nothing set', async () => {
    const npmOrderctl = await runCommand(
      ['npm', 'run', '--silent', 'orderctl', '--', 'create-organization', '--name', 'Acme'],
      {
        cwd: clone,
      },
    );
    expect(npmOrderctl).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/^Created organization (\d+) \(Acme\)\.$/m),
    });
    const organization = /Created organization (\d+)/.exec(npmOrderctl.stdout)![1]!;

    const listed = await orderctl('list-organizations');
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(new RegExp(`^${organization} +Acme `, 'm'));

    const created = await orderctl(
      '--json',
      'create-client',
      '--organization',
      organization,
      '--name',
      'sync',
      '--scopes',
      'read',
    );
    expect(created.code).toBe(0);
    const client = (JSON.parse(created.stdout) as { results: { client_id: string; redirect_uri: null } })
      .results;
    expect(client.redirect_uri).toBeNull();
    expect((await orderctl('rotate-client-secret', '--client', client.client_id)).code).toBe(0);
    expect((await orderctl('disable-client', '--client', client.client_id)).stdout).toContain('is disabled');
    expect((await orderctl('list-clients', '--organization', organization)).stdout).toMatch(/ disabled /);
    expect((await orderctl('--version')).stdout).toBe('orderctl 0.1.0\n');

    const rebuild = await runCommand(['npm', 'run', '--silent', 'rebuild-projections'], {
      cwd: clone,
      env: { LOG_FORMAT: 'json' },
    });
    expect(rebuild.code).toBe(0);
    expect(rebuild.stdout).toContain('read model rebuilt and swapped in');
    // Not a terminal here, as in a Kubernetes Job: the progress still shows, as lines.
    expect(rebuild.stderr).toMatch(/^rebuild \[.*\] 100% \| (\d+)\/\1 events/m);
  }, 120_000);

  it('stops on SIGTERM and starts again on the same data', async () => {
    const { clientId } = bannerClient(instance!.output().stderr);
    const postmaster = await postmasterPid(dataDir());
    // npm, signalled with the platform it runs, ends by the signal; the platform drains and stops.
    await instance!.stop();
    const deadline = Date.now() + 30_000;
    while (
      (processExists(postmaster) || existsSync(join(dataDir(), 'instance.json'))) &&
      Date.now() < deadline
    ) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(processExists(postmaster)).toBe(false);
    expect(existsSync(join(dataDir(), 'instance.json'))).toBe(false);
    expect(instance!.output().stdout).toContain(`"msg":"stopped"`);

    instance = await startStandalone({ cwd: clone });
    expect(bannerClient(instance.output().stderr).clientId).toBe(clientId);
    expect((await orderctl('list-organizations')).stdout).toMatch(/ Acme /);
  }, 120_000);
});

describe('start-up failures: one line naming the setting, exit code 1, nothing created', () => {
  let dataDir: string;
  // A port something listens on, which never answers what connects.
  let taken: Server;
  let takenPort: number;
  const connections = new Set<Socket>();
  beforeAll(async () => {
    takenPort = await freePort();
    taken = createServer((socket) => {
      connections.add(socket);
      socket.on('close', () => connections.delete(socket));
    });
    await new Promise<void>((resolve) => taken.listen(takenPort, '0.0.0.0', resolve));
  });
  afterAll(async () => {
    for (const socket of connections) socket.destroy();
    await new Promise((resolve) => taken.close(resolve));
  });
  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'ofp start '));
  });
  afterEach(() => removeDataDir(dataDir));

  const wrongPassword = (): string => {
    const url = new URL(process.env.DATABASE_URL!);
    url.password = 'not-the-password';
    return url.toString();
  };
  const cases: [string, () => Record<string, string>, RegExp][] = [
    [
      'PORT taken',
      () => ({ PORT: String(takenPort) }),
      /^PORT=\d+: the port is already in use \(0\.0\.0\.0:\d+\); stop what listens there or set PORT to a free port$/,
    ],
    [
      'EMBEDDED_POSTGRES_PORT taken',
      () => ({ EMBEDDED_POSTGRES_PORT: String(takenPort) }),
      /^EMBEDDED_POSTGRES_PORT=\d+: the port is already in use \(127\.0\.0\.1:\d+\); stop what listens there or set EMBEDDED_POSTGRES_PORT to a free port$/,
    ],
    [
      'DATA_DIR under a file',
      () => ({ DATA_DIR: join(dataDir, 'a-file', 'data') }),
      /^DATA_DIR=.+: .+a-file is not a directory; set DATA_DIR to a folder$/,
    ],
    [
      'DATABASE_URL that does not answer',
      () => ({ DATABASE_URL: `postgres://app:secret@127.0.0.1:${takenPort}/ofp`, PORT: '0' }),
      /^DATABASE_URL: cannot use the database at app@127\.0\.0\.1:\d+\/ofp: .*timeout.*$/,
    ],
    [
      'DATABASE_URL with a wrong password',
      () => ({ DATABASE_URL: wrongPassword(), PORT: '0' }),
      /^DATABASE_URL: cannot use the database at .+: password authentication failed for user "postgres" \(SQLSTATE 28P01\)$/,
    ],
    [
      'SECRETS_KEY_FILE that is not there',
      () => ({ SECRETS_KEY_FILE: join(dataDir, 'no-such-key') }),
      /^SECRETS_KEY_FILE=.+no-such-key: cannot read the secrets key file \(ENOENT\); set SECRETS_KEY_FILE to the file that holds the key-encryption keys$/,
    ],
    [
      'SECRETS_KEY_FILE that is not a key file',
      () => ({ SECRETS_KEY_FILE: join(dataDir, 'a-file') }),
      /^SECRETS_KEY_FILE=.+a-file: the file holds no key$/,
    ],
  ];

  it.each(cases)(
    '%s',
    async (_name, settings, message) => {
      await writeFile(join(dataDir, 'a-file'), '');
      const before = await clusters();
      const result = await runToExit({ env: { DATA_DIR: dataDir, ...settings() } });
      expect(result).toEqual({ code: 1, stdout: '', stderr: expect.stringMatching(/\n$/) });
      expect(result.stderr.trimEnd()).toMatch(message);
      expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect((await readdir(dataDir)).filter((entry) => entry !== 'a-file')).toEqual([]);
      expect(await clusters()).toEqual(before);
    },
    120_000,
  );

  it('DATABASE_URL refused names the host and the error', async () => {
    const port = await freePort();
    const result = await runToExit({
      env: { DATA_DIR: dataDir, DATABASE_URL: `postgres://app:secret@127.0.0.1:${port}/ofp` },
    });
    expect(result.stderr).toBe(
      `DATABASE_URL: cannot use the database at app@127.0.0.1:${port}/ofp: ECONNREFUSED 127.0.0.1:${port}\n`,
    );
  });

  it('an invalid setting names it, without a stack trace', async () => {
    const result = await runToExit({ env: { DATA_DIR: dataDir, PORT: 'eighty' } });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^Invalid configuration:\n {2}PORT: .+\n$/);
    expect(await readdir(dataDir)).toEqual([]);
  });

  it('settings that contradict each other are refused, naming them', async () => {
    const result = await runToExit({
      env: { DATA_DIR: dataDir, WEBHOOK_WORKER_CONCURRENCY: '16', WEBHOOK_ENDPOINT_CONCURRENCY: '16' },
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^Invalid configuration:\n {2}WEBHOOK_ENDPOINT_CONCURRENCY: \(16\) must be below WEBHOOK_WORKER_CONCURRENCY \(16\): .+\n$/,
    );
    expect(await readdir(dataDir)).toEqual([]);
  });
});
