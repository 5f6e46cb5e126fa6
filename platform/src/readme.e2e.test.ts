import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { freePort, startTestPlatform, type RunningPlatform } from '@ofp/testing';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** The README's runnable examples, in order: its ```sh example blocks. */
function examples(markdown: string): string[] {
  return [...markdown.matchAll(/^```sh example\n([\s\S]*?)^```$/gm)].map((match) => match[1]!);
}

interface Envelope {
  count: number;
  total_results?: number;
  results: Record<string, unknown> | Record<string, unknown>[] | null;
  errors: Record<string, string[]> | null;
}

describe('README "Try it": every example, run as written against a running instance', () => {
  let platform: RunningPlatform;
  let client: { client_id: string; client_secret: string };
  beforeAll(async () => {
    platform = await startTestPlatform('standalone', { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
    const admin = { authorization: `Bearer ${platform.adminToken}`, 'content-type': 'application/json' };
    const organization = (await (
      await fetch(`${platform.adminUrl}/admin/organizations`, {
        method: 'POST',
        headers: admin,
        body: JSON.stringify({ name: 'README' }),
      })
    ).json()) as { results: { id: number } };
    client = (
      (await (
        await fetch(`${platform.adminUrl}/admin/organizations/${organization.results.id}/clients`, {
          method: 'POST',
          headers: admin,
          body: JSON.stringify({ name: 'README', scopes: ['read', 'write', 'operations'] }),
        })
      ).json()) as { results: { client_id: string; client_secret: string } }
    ).results;
  });
  afterAll(() => platform.stop());

  /** Runs a script as the README's reader would, in bash with `set -euo pipefail`. */
  const bash = (script: string) =>
    spawn('bash', ['-c', `set -euo pipefail\n${script}`], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });

  it('stops at the token with the refusal when the placeholders are left as they are', async () => {
    const [token] = examples(await readFile(`${ROOT}/README.md`, 'utf8'));
    const shell = bash(
      `${token!.replaceAll('http://localhost:8080', platform.apiUrl)}\necho "went on with $TOKEN"`,
    );
    let output = '';
    shell.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    shell.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => shell.once('exit', resolve));
    expect(code).not.toBe(0);
    expect(output).toMatch(/TOKEN: no token; the platform answered: \{.*"invalid_client"/);
    expect(output).not.toContain('went on');
  });

  it('creates, updates with If-Match, searches with q and a dotted filter, and delivers to the sample receiver', async () => {
    const blocks = examples(await readFile(`${ROOT}/README.md`, 'utf8'));
    expect(blocks).toHaveLength(6);
    const receiverPort = await freePort();
    // Only what differs here from a person's machine: the ports, and the credentials the banner shows.
    const localized = blocks.map((block, i) => {
      const replaced = block
        .replaceAll('http://localhost:8080', platform.apiUrl)
        .replaceAll('localhost:4000', `localhost:${receiverPort}`)
        .replace(/^CLIENT_ID=….*$/m, `CLIENT_ID=${client.client_id}`)
        .replace(/^CLIENT_SECRET=….*$/m, `CLIENT_SECRET=${client.client_secret}`);
      return `echo '--- example ${i}'\n${replaced}`;
    });
    expect(localized.join('\n')).not.toContain('…');

    const shell = spawn('bash', ['-c', `set -euo pipefail\n${localized.join('\n')}`], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/', PORT: String(receiverPort) },
      // The receiver runs on in the background: its process group is ended below.
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    shell.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    shell.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    try {
      const code = await new Promise<number | null>((resolve) => shell.once('exit', resolve));
      expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
      // The receiver prints the delivery.
      const deadline = Date.now() + 20_000;
      while (!stdout.includes('person.updated') && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      process.kill(-shell.pid!, 'SIGTERM');
    }

    const sections = stdout.split(/^--- example \d+\n/m).slice(1);
    expect(sections).toHaveLength(6);
    const envelopes = (section: string): Envelope[] =>
      section
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Envelope);

    expect(sections[0]).toBe('');
    const [created] = envelopes(sections[1]!);
    expect(created).toMatchObject({ count: 1, errors: null, results: { last_name: 'Lovelace', version: 1 } });
    const id = (created!.results as { id: number }).id;

    const [updated, stale] = envelopes(sections[2]!);
    expect(updated).toMatchObject({ results: { id, company: 'Analytical Engines', version: 2 } });
    expect(stale).toMatchObject({ count: 0, results: null, errors: { base: [expect.any(String)] } });

    const [search] = envelopes(sections[3]!);
    expect(search).toMatchObject({ count: 1, total_results: 1, results: [{ id, last_name: 'Lovelace' }] });
    const [dotted] = envelopes(sections[4]!);
    expect(dotted).toMatchObject({ count: 1, total_results: 1, results: [{ id }] });

    const [emailChanged] = envelopes(sections[5]!);
    expect(emailChanged).toMatchObject({ results: { id, email: 'ada@analytical.example', version: 3 } });
    expect(sections[5]).toContain(`webhook-receiver: listening on http://localhost:${receiverPort}/`);
    expect(sections[5]).toMatch(
      new RegExp(`^person\\.updated ${id} sequence 3 \\(signature verified, webhook-id \\S+\\)$`, 'm'),
    );

    // The receiver was ready before the write: the delivery succeeded at its first attempt.
    const token = (await (
      await fetch(`${platform.apiUrl}/oauth/token`, {
        method: 'POST',
        headers: {
          authorization: `Basic ${Buffer.from(`${client.client_id}:${client.client_secret}`).toString('base64')}`,
        },
        body: new URLSearchParams({ grant_type: 'client_credentials' }),
      })
    ).json()) as { access_token: string };
    const q = JSON.stringify({
      filters: [{ operand: 'event_type', operator: '=', value: 'person.updated' }],
    });
    const deliveries = async () =>
      (
        (await (
          await fetch(`${platform.apiUrl}/v2/webhook_deliveries?q=${encodeURIComponent(q)}`, {
            headers: { authorization: `Bearer ${token.access_token}` },
          })
        ).json()) as { results: { status: string; attempts: number }[] }
      ).results;
    // The attempt is recorded once the receiver has answered.
    let delivered = await deliveries();
    for (const until = Date.now() + 10_000; delivered[0]?.status === 'pending' && Date.now() < until;) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      delivered = await deliveries();
    }
    expect(delivered).toMatchObject([{ status: 'succeeded', attempts: 1 }]);
  });
});
