import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SecretsKeyring, sealedContext, sealedKeyCounts, type SealedColumn } from '@ofp/runtime';
import {
  createIntegrator,
  createTestDatabase,
  startPlatform,
  startWebhookReceiver,
  type Integrator,
  type RunningPlatform,
  type TestDatabase,
  type WebhookReceiver,
} from '@ofp/testing';

const ORDERCTL = fileURLToPath(new URL('../../services/auth/dist/cli/orderctl.js', import.meta.url));

/**
 * `orderctl rotate-secrets-key` (API.md §12, docs/secrets.md) against a running platform on real
 * Postgres: values sealed under key A, the key file changed to B (A still second), the command re-seals
 * everything under B while the platform delivers webhooks and signs tokens, then A is retired.
 */
describe('rotating the secrets key while the platform serves', () => {
  const a = { id: 'key-a', key: randomBytes(32) };
  const b = { id: 'key-b', key: randomBytes(32) };
  const line = (k: { id: string; key: Buffer }): string => `${k.id} ${k.key.toString('base64')}\n`;
  let directory: string;
  let keyFile: string;
  let database: TestDatabase;
  let platform: RunningPlatform;
  let integrator: Integrator;
  let receiver: WebhookReceiver;
  let secrets: string[] = [];

  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'ofp-rotation-'));
    keyFile = join(directory, 'secrets-key');
    await writeFile(keyFile, line(a), { mode: 0o600 });
    database = await createTestDatabase();
    platform = await startPlatform({
      databaseUrl: database.url,
      env: { SECRETS_KEY_FILE: keyFile, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' },
    });
    integrator = await createIntegrator(platform, { name: 'Rotation' });
    receiver = await startWebhookReceiver({ secrets: () => secrets });
  }, 120_000);

  afterAll(async () => {
    await platform?.stop();
    await receiver?.close();
    await database?.drop();
    await rm(directory, { recursive: true, force: true });
  });

  function orderctl(
    args: readonly string[],
    file: string,
  ): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      execFile(
        process.execPath,
        [ORDERCTL, ...args],
        { env: { PATH: process.env.PATH ?? '', DATABASE_URL: database.url, SECRETS_KEY_FILE: file } },
        (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
      );
    });
  }

  /** Every declared sealed column's values by key id, as psql would count them. */
  async function keysInUse(): Promise<Record<string, number>> {
    const { rows } = await database.pool.query<{
      table_name: string;
      column_name: string;
      key_columns: string[];
    }>('SELECT table_name, column_name, key_columns FROM secrets.sealed_columns');
    const counts: Record<string, number> = {};
    for (const row of rows) {
      const column: SealedColumn = { table: row.table_name, column: row.column_name, key: row.key_columns };
      for (const { keyId, count } of await sealedKeyCounts(database.pool, column))
        counts[keyId ?? 'clear'] = (counts[keyId ?? 'clear'] ?? 0) + count;
    }
    return counts;
  }

  /** The platform's `secrets_key_file_refused`, as scraped. */
  async function refusedGauge(): Promise<string | undefined> {
    const text = await (await fetch(`${platform.processes.all}/metrics`)).text();
    return /^secrets_key_file_refused(?:{[^}]*})? (\d+)$/m.exec(text)?.[1];
  }

  async function token(): Promise<number> {
    const basic = Buffer.from(`${integrator.clientId}:${integrator.clientSecret}`).toString('base64');
    const issued = await fetch(`${platform.authUrl}/oauth/token`, {
      method: 'POST',
      headers: { authorization: `Basic ${basic}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials&scope=read',
    });
    if (issued.status !== 200) return issued.status;
    const { access_token: accessToken } = (await issued.json()) as { access_token: string };
    const used = await fetch(`${platform.apiUrl}/v2/people`, {
      headers: { authorization: `Bearer ${accessToken}` },
    });
    await used.text();
    return used.status;
  }

  it('re-seals everything under the new key, waiting for the platform to hold it, while deliveries and tokens go on', async () => {
    const created = await integrator.request<{ id: number; secret: string }>('POST', '/v2/webhooks', {
      body: { url: receiver.url, events: ['person.created'] },
      headers: { 'idempotency-key': 'rotation-hook' },
    });
    expect(created.status).toBe(201);
    secrets = [created.body.results.secret];
    expect(Object.keys(await keysInUse()).sort()).toEqual(['key-a']);

    // The command's key file puts B first, but the platform's still holds A alone: it would not open
    // what B seals. The command waits, then refuses, naming the process, and changes nothing.
    const early = join(directory, 'early-key');
    await writeFile(early, line(b) + line(a), { mode: 0o600 });
    const refused = await orderctl(['rotate-secrets-key', '--wait', '1'], early);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(
      /nothing re-sealed: 1 running process\(es\) do not seal with key key-b yet: all@\S+ \(seals with key-a, holds key-a\)/,
    );
    expect(Object.keys(await keysInUse())).toEqual(['key-a']);

    // Load: people created (each a delivery) and tokens issued and used, all along.
    let loading = true;
    const people: number[] = [];
    const tokenAnswers: number[] = [];
    const load = (async () => {
      while (loading) {
        const person = await integrator.request<{ id: number }>('POST', '/v2/people', {
          body: { last_name: `Rotation ${people.length}` },
        });
        expect(person.status).toBe(201);
        people.push(person.body.results.id);
        tokenAnswers.push(await token());
      }
    })();

    await writeFile(keyFile, line(b) + line(a));
    const rotated = await orderctl(['rotate-secrets-key', '--wait', '60'], keyFile);
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    loading = false;
    await load;

    expect(rotated).toMatchObject({ code: 0 });
    expect(rotated.stderr).toMatch(/re-sealing under key key-b: (\d+)\/\1 values \(100%\)/);
    expect(rotated.stdout).toMatch(
      /^\d+ stored secret\(s\) re-sealed under key key-b \(.*auth\.signing_keys\.private_key.*webhooks\.endpoints\.secret.*\)/,
    );
    expect(rotated.stdout).toContain(
      'Nothing is sealed under key key-a any more: it may be removed from the key file.',
    );
    expect(await keysInUse()).toEqual({ 'key-b': expect.any(Number) });
    expect(await refusedGauge()).toBe('0');

    expect(people.length).toBeGreaterThan(0);
    expect(tokenAnswers.every((status) => status === 200)).toBe(true);
    await receiver.waitFor((received) => received.length >= people.length, 30_000);
    expect(receiver.received.every((delivery) => delivery.verified)).toBe(true);
    expect(new Set(receiver.received.map((delivery) => delivery.payload?.data.id))).toEqual(new Set(people));
  }, 120_000);

  it('keeps a key the file drops while a value is still sealed with it, and names that value', async () => {
    const second = await integrator.request<{ id: number; secret: string }>('POST', '/v2/webhooks', {
      body: { url: receiver.url, events: ['person.created'] },
    });
    expect(second.status).toBe(201);
    const webhookId = second.body.results.id;
    // A value sealed with A after the rotation (a restored backup row, say).
    const sealedWithA = new SecretsKeyring([a]).seal(
      second.body.results.secret,
      sealedContext('webhooks.endpoints', [webhookId]),
    );
    await database.pool.query('UPDATE webhooks.endpoints SET secret = $1 WHERE webhook_id = $2', [
      sealedWithA,
      webhookId,
    ]);

    await writeFile(keyFile, line(b));
    // Past a round of reading the file again: the platform keeps A, since a stored value needs it.
    await new Promise((resolve) => setTimeout(resolve, 7_000));
    const { rows } = await database.pool.query<{ key_ids: string[] }>(
      'SELECT key_ids FROM secrets.key_holders',
    );
    expect(rows.map((row) => row.key_ids)).toEqual([['key-b', 'key-a']]);
    expect(await refusedGauge()).toBe('1');

    const rotated = await orderctl(['rotate-secrets-key', '--wait', '10'], keyFile);
    expect(rotated.code).toBe(1);
    expect(rotated.stderr).toContain(
      `does not open: webhooks.endpoints.secret webhook_id=${webhookId}: sealed with key key-a, which is not among the keys`,
    );
    expect(rotated.stderr).not.toContain(second.body.results.secret.replace(/^whsec_/, ''));
  }, 60_000);
});
