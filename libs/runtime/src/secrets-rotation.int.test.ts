import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { createPool } from './postgres.js';
import { loadSecretsKeyring } from './secrets-at-rest.js';
import { HOLDER_REFRESH_MS, secretsKeyFileWatch } from './secrets-rotation.js';

// On the test server's own database; the holders it records are removed or named by this file's pid.
const url = process.env.DATABASE_URL!;

const line = (id: string): string => `${id} ${randomBytes(32).toString('base64')}\n`;

describe('secretsKeyFileWatch', () => {
  let directory: string;
  beforeAll(async () => {
    directory = await mkdtemp(join(tmpdir(), 'ofp-key-watch-'));
  });
  afterAll(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('names what failed when Postgres does not answer its round: the changed keys check, or the holder record', async () => {
    const messages: string[] = [];
    const logger = pino(
      { level: 'warn' },
      new Writable({
        write(chunk: Buffer, _encoding, done) {
          messages.push((JSON.parse(chunk.toString()) as { msg: string; name?: string }).msg);
          done();
        },
      }),
    );
    const watch = async (name: string, changes: boolean) => {
      const file = join(directory, name);
      await writeFile(file, line('key-a'), { mode: 0o600 });
      const pool = createPool({ connectionString: url, applicationName: `key-watch-test-${name}`, max: 1 });
      const watcher = secretsKeyFileWatch({
        pool,
        keyring: await loadSecretsKeyring(file),
        file,
        setting: 'SECRETS_KEY_FILE',
        name,
        logger: logger.child({ name }),
      });
      await watcher.start();
      // A database the process can no longer reach, then (for one of them) a key file changed meanwhile.
      await pool.end();
      if (changes) await writeFile(file, line('key-b') + line('key-a'), { mode: 0o600 });
      return watcher;
    };
    const watchers = [await watch('unchanged', false), await watch('changed', true)];
    try {
      await new Promise((resolve) => setTimeout(resolve, HOLDER_REFRESH_MS + 1_500));
      const holderRecord = messages.filter((m) => m.startsWith('could not record this process'));
      const keysCheck = messages.filter((m) =>
        m.startsWith('the secrets key file changed and its keys could not'),
      );
      // Both failed to record themselves; only the one whose file changed had keys to check.
      expect(holderRecord).toHaveLength(2);
      expect(keysCheck).toHaveLength(1);
      expect(messages).toHaveLength(3);
    } finally {
      await Promise.all(watchers.map((watcher) => watcher.stop()));
      // Their clean stops could not remove them, as the database was gone: this file does.
      const cleanup = createPool({
        connectionString: url,
        applicationName: 'key-watch-test-cleanup',
        max: 1,
      });
      await cleanup.query('DELETE FROM secrets.key_holders WHERE holder = ANY($1)', [
        ['unchanged', 'changed'].map((name) => `${name}@${hostname()}:${process.pid}`),
      ]);
      await cleanup.end();
    }
  }, 20_000);
});
