import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  SecretsKeyError,
  SecretsKeyring,
  isSealed,
  loadSecretsKeyring,
  sealedContext,
  sealedKeyId,
  standaloneSecretsKeyFile,
} from './secrets-at-rest.js';
import { StartupError } from './preflight.js';

const key = (id: string) => ({ id, key: randomBytes(32) });
const context = sealedContext('webhooks.endpoints', [7]);

describe('SecretsKeyring (envelope encryption, AES-256-GCM)', () => {
  const ring = new SecretsKeyring([key('k1')]);

  it('seals to a value that does not hold the secret and opens to it', () => {
    const secret = 'whsec_' + randomBytes(32).toString('base64');
    const sealed = ring.seal(secret, context);
    expect(isSealed(sealed)).toBe(true);
    expect(sealedKeyId(sealed)).toBe('k1');
    expect(sealed).not.toContain(secret);
    expect(sealed).not.toContain(secret.slice(6, 20));
    expect(ring.open(sealed, context)).toBe(secret);
    // A fresh data key and IV each time: the same secret never seals to the same bytes.
    expect(ring.seal(secret, context)).not.toBe(sealed);
  });

  it('opens only for the row it was sealed for', () => {
    const sealed = ring.seal('s', context);
    expect(() => ring.open(sealed, sealedContext('webhooks.endpoints', [8]))).toThrow(SecretsKeyError);
    expect(() => ring.open(sealed, sealedContext('auth.signing_keys', [7]))).toThrow(SecretsKeyError);
    // Key values read as text (pg's bigints) and as numbers name the same row.
    expect(ring.open(sealed, sealedContext('webhooks.endpoints', ['7']))).toBe('s');
  });

  it('refuses an altered value', () => {
    const sealed = ring.seal('secret', context);
    const parts = sealed.split(':');
    const last = Buffer.from(parts.at(-1)!, 'base64url');
    last[last.length - 1]! ^= 1;
    const altered = [...parts.slice(0, -1), last.toString('base64url')].join(':');
    expect(() => ring.open(altered, context)).toThrow(SecretsKeyError);
  });

  it('refuses a value sealed under a key it does not hold, or another key with the same id', () => {
    const sealed = ring.seal('secret', context);
    expect(() => new SecretsKeyring([key('k2')]).open(sealed, context)).toThrow(/key k1, which is not among/);
    expect(() => new SecretsKeyring([key('k1')]).open(sealed, context)).toThrow(/key k1 does not open/);
  });

  it('re-wraps under the current key, seals clear values, and leaves current ones as they are', () => {
    const sealed = ring.seal('secret', context);
    const rotated = new SecretsKeyring([key('k2'), ...ring.keys]);
    const rewrapped = rotated.rewrap(sealed, context);
    expect(sealedKeyId(rewrapped)).toBe('k2');
    // Only the data key is wrapped anew: the secret's own ciphertext is the same.
    expect(rewrapped.split(':').at(-1)).toBe(sealed.split(':').at(-1));
    expect(new SecretsKeyring([rotated.keys[0]]).open(rewrapped, context)).toBe('secret');
    expect(rotated.rewrap(rewrapped, context)).toBe(rewrapped);
    const fromClear = rotated.rewrap('clear secret', context);
    expect(sealedKeyId(fromClear)).toBe('k2');
    expect(rotated.open(fromClear, context)).toBe('clear secret');
  });
});

describe('the key file (SECRETS_KEY_FILE)', () => {
  let directory: string;

  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), 'ofp-secrets-'));
  });

  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it('standalone: is generated 0600 in DATA_DIR once, and kept', async () => {
    const file = await standaloneSecretsKeyFile(join(directory, 'data'));
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const text = await readFile(file, 'utf8');
    expect(await standaloneSecretsKeyFile(join(directory, 'data'))).toBe(file);
    expect(await readFile(file, 'utf8')).toBe(text);
    const ring = await loadSecretsKeyring(file);
    expect(ring.keys).toHaveLength(1);
  });

  it('lists keys one a line, the first sealing, comments and blank lines aside', async () => {
    const file = join(directory, 'keys');
    const [a, b] = [randomBytes(32), randomBytes(32)];
    await writeFile(file, `# rotated\nnew ${a.toString('base64')}\n\nold ${b.toString('base64')}\n`);
    const ring = await loadSecretsKeyring(file);
    expect(ring.currentId).toBe('new');
    expect(ring.keys.map((k) => k.id)).toEqual(['new', 'old']);
  });

  it.each([
    ['missing', undefined, /cannot read the secrets key file \(ENOENT\)/],
    ['empty', '# nothing\n', /holds no key/],
    [
      'a short key',
      `k1 ${randomBytes(16).toString('base64')}\n`,
      /line 1 is not "<key id> <base64 of 32 bytes>"/,
    ],
    ['a key without id', `${randomBytes(32).toString('base64')}\n`, /line 1 is not/],
    [
      'an id twice',
      `k1 ${randomBytes(32).toString('base64')}\nk1 ${randomBytes(32).toString('base64')}\n`,
      /k1 appears twice/,
    ],
  ])('refuses a file %s with one line naming the setting', async (_, text, message) => {
    const file = join(directory, 'keys');
    if (text !== undefined) await writeFile(file, text);
    const refused = await loadSecretsKeyring(file).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(StartupError);
    expect((refused as Error).message).toMatch(new RegExp(`^SECRETS_KEY_FILE=${file}: `));
    expect((refused as Error).message).toMatch(message);
    expect((refused as Error).message).not.toContain('\n');
  });
});
