// @runs-alone: freezes Postgres and times the watchdog
import { lstat, mkdtemp, readFile, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { processExists } from '@ofp/standalone';
import { startStandalone, waitUntil, type StandaloneProcess } from '@ofp/testing';

/** What the instance said about its Postgres, and whether it still runs: for a failure's message. */
function postgresLines(instance: StandaloneProcess): string {
  const lines = instance
    .output()
    .stdout.split('\n')
    .filter((line) => /postgres/i.test(line))
    .slice(-12);
  return `instance exit code: ${instance.child.exitCode}; its last lines about Postgres:\n${lines.join('\n')}`;
}

/** The pid of the postmaster running the cluster of `dataDir`, once one other than `not` runs. */
async function livePostmaster(
  instance: StandaloneProcess,
  dataDir: string,
  not?: number,
  timeoutMs = 150_000,
): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const pid = await readFile(join(dataDir, 'postgres', 'postmaster.pid'), 'utf8').then(
      (content) => Number(content.split('\n')[0]),
      () => undefined,
    );
    if (pid !== undefined && pid !== not && processExists(pid)) return pid;
    if (Date.now() > deadline || instance.child.exitCode !== null) {
      throw new Error(`no postmaster other than ${not} within ${timeoutMs} ms; ${postgresLines(instance)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * docs/operations.md, "Standalone: when the embedded Postgres dies": the instance starts it again, with every
 * committed write (crash recovery), and readiness says 503 meanwhile; when it keeps dying (a sixth
 * time within 10 minutes) the process exits 1, for its supervisor to start it anew.
 */
describe('a standalone instance whose embedded Postgres is killed (SIGKILL)', () => {
  let dataDir: string;
  let instance: StandaloneProcess;
  let headers: Record<string, string>;

  beforeAll(async () => {
    // As `mktemp -d` makes it: 0700, which as root user postgres cannot enter.
    dataDir = await mkdtemp(join(tmpdir(), 'ofp-data-'));
    instance = await startStandalone({ env: { DATA_DIR: dataDir } });
    const { stderr } = instance.output();
    const id = /^ {2}client_id: +(\S+)$/m.exec(stderr)![1]!;
    const secret = /^ {2}client_secret: +(\S+)$/m.exec(stderr)![1]!;
    const token = (await (
      await fetch(`${instance.url}/oauth/token`, {
        method: 'POST',
        headers: { authorization: `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}` },
        body: new URLSearchParams({ grant_type: 'client_credentials' }),
      })
    ).json()) as { access_token: string };
    headers = { authorization: `Bearer ${token.access_token}`, 'content-type': 'application/json' };
  }, 120_000);
  afterAll(async () => {
    await instance.stop();
    const link = join(dataDir, 'postgres');
    if ((await lstat(link).catch(() => undefined))?.isSymbolicLink()) {
      await rm(await realpath(link), { recursive: true, force: true });
    }
    await rm(dataDir, { recursive: true, force: true });
  });

  const create = async (lastName: string): Promise<number> => {
    const response = await fetch(`${instance.url}/v2/people`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ last_name: lastName }),
    });
    expect(response.status).toBe(201);
    return ((await response.json()) as { results: { id: number } }).results.id;
  };

  it('answers 503 within seconds, starts Postgres again, and every acknowledged write is there', async () => {
    const ids: number[] = [];
    for (let i = 0; i < 20; i++) ids.push(await create(`Acknowledged ${i}`));
    const killed = await livePostmaster(instance, dataDir);
    process.kill(killed, 'SIGKILL');

    expect(await waitUntil(instance.url, 503, instance, 5_000)).toBeLessThan(5_000);
    await waitUntil(instance.url, 200, instance, 60_000);
    expect(await livePostmaster(instance, dataDir, killed)).not.toBe(killed);
    for (const [i, id] of ids.entries()) {
      const response = await fetch(`${instance.url}/v2/people/${id}`, { headers });
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ results: { id, last_name: `Acknowledged ${i}` } });
    }
    await create('After the restart');
    expect(instance.child.exitCode).toBeNull();
    expect(instance.output().stdout).toContain(
      'the embedded Postgres stopped (signal SIGKILL); starting it again',
    );
  });

  it('exits 1 when Postgres keeps dying, so that a supervisor starts the platform again', async () => {
    // Five restarts within 10 minutes are allowed, the first was above: the sixth death ends the process.
    const restarted = (): number =>
      instance.output().stdout.split('the embedded Postgres runs again').length - 1;
    let killed = await livePostmaster(instance, dataDir);
    for (let death = 2; death <= 6; death++) {
      process.kill(killed, 'SIGKILL');
      if (death === 6) break;
      // Killed while being started again, it would count as a failed start of the same restart.
      const deadline = Date.now() + 150_000;
      while (restarted() < death) {
        if (Date.now() > deadline || instance.child.exitCode !== null) {
          throw new Error(`Postgres did not run again after death ${death}; ${postgresLines(instance)}`);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      killed = await livePostmaster(instance, dataDir, killed);
    }
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([
      instance.exited,
      new Promise<string>((resolve) => (timer = setTimeout(() => resolve('still running'), 30_000))),
    ]);
    clearTimeout(timer);
    expect(code).toBe(1);
    expect(instance.output().stdout).toContain('the embedded Postgres is lost; exiting');
  }, 600_000);
});
