import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { SecretsKeyring, newSecretsKeyFile } from '@ofp/runtime';

/** A fresh key-encryption keyring for a service under test. */
export function testSecrets(id = 'test'): SecretsKeyring {
  return new SecretsKeyring([{ id, key: randomBytes(32) }]);
}

/**
 * The key file of the platform processes that tests start (SECRETS_KEY_FILE): one per machine, made
 * on first use, so that a process restarted on a database opens what its predecessor sealed.
 */
export function testSecretsKeyFile(): string {
  const file = join(tmpdir(), 'ofp-test-secrets-key');
  try {
    writeFileSync(file, newSecretsKeyFile('test'), { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  return file;
}
