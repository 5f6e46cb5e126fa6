/**
 * Schemathesis (PyPI) against a running standalone instance (`.ci/run`): every operation of its
 * `/openapi.json`, authenticated with a client-credentials token of a client made with `orderctl` (and
 * with that client's credentials at the OAuth endpoints: scripts/schemathesis.toml), a
 * fixed seed and a bounded number of examples per operation. It fails on any 5xx, a hang, or a
 * response that does not conform to the document (status code, content type, headers, schema).
 *
 *   npm run fuzz:api     (schemathesis in .cache/schemathesis: .ci/run installs it)
 *
 * The instance runs on free ports with a DATA_DIR of its own under .cache, removed afterwards with its
 * Postgres cluster. SCHEMATHESIS_MAX_EXAMPLES (default 15) and SCHEMATHESIS_SEED (default 1) tune the run.
 */
import { spawn } from 'node:child_process';
import { realpath, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { clientCredentialsToken } from '@ofp/client';
import { REPOSITORY_ROOT, runCommand, startStandalone, UNLIMITED_RATE } from '../libs/testing/src/index.js';

const CACHE = join(REPOSITORY_ROOT, '.cache');
const SCHEMATHESIS = join(CACHE, 'schemathesis', 'bin', 'schemathesis');
const DATA_DIR = join(CACHE, 'api-fuzz-instance');

/** DATA_DIR and the cluster it links to (as root the cluster lies in /var/lib/ofp, docs/operations.md, "Starting"). */
async function removeInstanceData(): Promise<void> {
  const cluster = await realpath(join(DATA_DIR, 'postgres')).catch(() => undefined);
  if (cluster !== undefined) await rm(cluster, { recursive: true, force: true });
  await rm(DATA_DIR, { recursive: true, force: true });
}

await removeInstanceData();
console.log('starting a standalone instance');
const instance = await startStandalone({
  env: {
    DATA_DIR,
    LOG_LEVEL: 'warn',
    // The fuzzer's requests all come from one client: its bucket would answer most of them 429.
    ...UNLIMITED_RATE,
  },
});
let code: number;
try {
  const orderctl = async (...args: string[]): Promise<Record<string, unknown>> => {
    const run = await runCommand(['npm', 'run', '--silent', 'orderctl', '--', '--json', ...args], {
      env: { DATA_DIR },
    });
    if (run.code !== 0) throw new Error(`orderctl ${args.join(' ')}: ${run.stderr}${run.stdout}`);
    return (JSON.parse(run.stdout) as { results: Record<string, unknown> }).results;
  };
  const organization = await orderctl('create-organization', '--name', 'Schemathesis');
  const client = await orderctl(
    'create-client',
    '--organization',
    String(organization.id),
    '--name',
    'schemathesis',
    '--scopes',
    'read,write,operations',
  );
  const token = await clientCredentialsToken(instance.url, {
    clientId: String(client.client_id),
    clientSecret: String(client.client_secret),
  });
  const args = [
    '--config-file',
    join(REPOSITORY_ROOT, 'scripts', 'schemathesis.toml'),
    'run',
    `${instance.url}/openapi.json`,
    '--url',
    instance.url,
    '--seed',
    process.env.SCHEMATHESIS_SEED ?? '1',
    '--max-examples',
    process.env.SCHEMATHESIS_MAX_EXAMPLES ?? '15',
    '--checks',
    'not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,response_schema_conformance',
    '--request-timeout',
    '20',
    // One worker: hypothesis describes its strategies with Python's ast module, which CPython 3.11
    // (Debian's) can break across threads ("AST constructor recursion depth mismatch").
    '--workers',
    '1',
    '--phases',
    'examples,coverage,fuzzing',
    '--no-shrink',
    '--output-truncate',
    'true',
  ];
  console.log(`schemathesis ${args.slice(0, 6).join(' ')} ...`);
  // Run from .cache: schemathesis keeps its state (.schemathesis/) in the folder it runs in.
  const fuzzer = spawn(SCHEMATHESIS, args, {
    cwd: CACHE,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      ...process.env,
      NO_COLOR: '1',
      OFP_FUZZ_HOOKS: join(REPOSITORY_ROOT, 'scripts', 'schemathesis-hooks.py'),
      OFP_FUZZ_TOKEN: token,
      OFP_FUZZ_CLIENT_ID: String(client.client_id),
      OFP_FUZZ_CLIENT_SECRET: String(client.client_secret),
    },
  });
  // Schemathesis frames its sections and its verdict in pytest's banners ("=== 3 warnings in 100.00s ===").
  // CI's log reader takes such a line for pytest's closing line, and one that counts no passed test for
  // a run that executed none, whatever the jest runs after it counted: the banners are printed as plain
  // headings instead, every other line as it comes.
  const lines = createInterface({ input: fuzzer.stdout });
  lines.on('line', (line) => console.log(line.replace(/^=+ (.*?) =+$/, '-- $1 --')));
  const closed = new Promise((resolve) => lines.once('close', resolve));
  code = await new Promise<number>((resolve) => fuzzer.once('exit', (exit) => resolve(exit ?? 1)));
  await closed;
} finally {
  await instance.stop();
  await removeInstanceData();
}
process.exit(code);
