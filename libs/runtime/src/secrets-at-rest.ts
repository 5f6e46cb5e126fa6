import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Pool } from './postgres.js';
import { StartupError } from './preflight.js';

/**
 * Secrets at rest (API.md §12): envelope encryption as Vault's transit engine and the cloud KMSs do it.
 * Each secret is encrypted with a data key of its own (AES-256-GCM, Node's crypto: no hand-made cipher
 * mode), and that data key is encrypted ("wrapped") with the deployment's key-encryption key, also
 * AES-256-GCM. Both carry the row's context (`table:id:column`) as additional authenticated data, so a
 * sealed value copied into another row, or another column, does not open there. Rotating the
 * key-encryption key re-wraps the data keys only ({@link SecretsKeyring.rewrap}); the secrets'
 * ciphertexts stay as they are.
 *
 * The stored form is one line of text, `ofp-sealed:v1:<key id>:<wrapped data key>:<ciphertext>`
 * (base64url, each part `iv ‖ tag ‖ ciphertext`), so it fits the text columns that held the clear values
 * and tells itself apart from them.
 */
const PREFIX = 'ofp-sealed:v1:';
const ALGORITHM = 'aes-256-gcm';
/** NIST SP 800-38D §8.2: a random 96-bit IV per encryption; each data key encrypts once. */
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;
/** A key id: short, printable, no separator of the stored form or of the key file. */
const KEY_ID = /^[A-Za-z0-9_.-]{1,64}$/;

/** One key-encryption key and the id the stored values name it by. */
export interface SecretsKey {
  readonly id: string;
  readonly key: Buffer;
}

/** A stored value that did not open: no key with its id, or one that is not the key that sealed it. */
export class SecretsKeyError extends Error {
  override readonly name = 'SecretsKeyError';
}

/** Whether a stored value is sealed (else it is a clear value stored before secrets were encrypted). */
export function isSealed(stored: string): boolean {
  return stored.startsWith(PREFIX);
}

/** The id of the key-encryption key that sealed a stored value. */
export function sealedKeyId(stored: string): string {
  if (!isSealed(stored)) throw new SecretsKeyError('not a sealed value');
  return stored.slice(PREFIX.length, stored.indexOf(':', PREFIX.length));
}

/**
 * The deployment's key-encryption keys: the first seals, every one opens (a key being rotated out stays
 * until nothing is sealed with it: `orderctl rotate-secrets-key`). Holds no state but the keys.
 */
export class SecretsKeyring {
  private current: readonly [SecretsKey, ...SecretsKey[]];
  private byId: ReadonlyMap<string, Buffer>;

  /**
   * `source`: where the keys come from, as a start-up error names it (`SECRETS_KEY_FILE=/etc/ofp/key`),
   * and `setting`, the setting to change.
   */
  constructor(
    keys: readonly [SecretsKey, ...SecretsKey[]],
    readonly source = 'SECRETS_KEY_FILE',
    readonly setting = 'SECRETS_KEY_FILE',
  ) {
    for (const { id, key } of keys) {
      if (!KEY_ID.test(id)) throw new Error(`not a key id: ${JSON.stringify(id)}`);
      if (key.length !== KEY_BYTES) throw new Error(`key ${id} is not ${KEY_BYTES} bytes`);
    }
    this.current = keys;
    this.byId = new Map(keys.map(({ id, key }) => [id, key]));
  }

  /** The keys, the one that seals first. */
  get keys(): readonly [SecretsKey, ...SecretsKey[]] {
    return this.current;
  }

  /** The ids of the keys, the one that seals first. */
  get ids(): string[] {
    return this.current.map(({ id }) => id);
  }

  /** The id of the key that seals. */
  get currentId(): string {
    return this.current[0].id;
  }

  /**
   * Takes the keys of `next` (the key file read again while the process runs: {@link watchSecretsKeyFile}),
   * so that everything holding this keyring seals and opens with them from now on.
   */
  adopt(next: SecretsKeyring): void {
    this.current = next.current;
    this.byId = next.byId;
  }

  /** Encrypts `secret` for the row that `context` names (`table:id:column`). */
  seal(secret: string, context: string): string {
    const dataKey = randomBytes(KEY_BYTES);
    const ciphertext = encrypt(dataKey, Buffer.from(secret, 'utf8'), context);
    return this.stored(this.currentId, this.wrap(this.currentId, dataKey, context), ciphertext);
  }

  /** The secret of a value {@link seal}ed for the same context; a {@link SecretsKeyError} if no key opens it. */
  open(stored: string, context: string): string {
    const { keyId, wrapped, ciphertext } = parse(stored);
    const dataKey = this.unwrap(keyId, wrapped, context);
    return decrypt(dataKey, ciphertext, context).toString('utf8');
  }

  /**
   * The same secret sealed under the current key: a clear value is sealed, a value sealed under another
   * key has its data key re-wrapped, one sealed under the current key is returned as it is.
   */
  rewrap(stored: string, context: string): string {
    if (!isSealed(stored)) return this.seal(stored, context);
    const { keyId, wrapped, ciphertext } = parse(stored);
    if (keyId === this.currentId) return stored;
    const dataKey = this.unwrap(keyId, wrapped, context);
    // The secret itself must open too: a re-wrap never writes a value that would not open.
    decrypt(dataKey, ciphertext, context);
    return this.stored(this.currentId, this.wrap(this.currentId, dataKey, context), ciphertext);
  }

  private wrap(keyId: string, dataKey: Buffer, context: string): Buffer {
    return encrypt(this.byId.get(keyId)!, dataKey, `${keyId}:${context}`);
  }

  private unwrap(keyId: string, wrapped: Buffer, context: string): Buffer {
    const key = this.byId.get(keyId);
    if (key === undefined) throw new SecretsKeyError(`sealed with key ${keyId}, which is not among the keys`);
    try {
      return decrypt(key, wrapped, `${keyId}:${context}`);
    } catch {
      throw new SecretsKeyError(`key ${keyId} does not open ${context} (another key under the same id?)`);
    }
  }

  private stored(keyId: string, wrapped: Buffer, ciphertext: Buffer): string {
    return `${PREFIX}${keyId}:${wrapped.toString('base64url')}:${ciphertext.toString('base64url')}`;
  }
}

function encrypt(key: Buffer, plaintext: Buffer, context: string): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv(ALGORITHM, key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(context, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), ciphertext]);
}

function decrypt(key: Buffer, sealed: Buffer, context: string): Buffer {
  if (sealed.length < IV_BYTES + TAG_BYTES) throw new SecretsKeyError(`${context}: truncated sealed value`);
  const decipher = createDecipheriv(ALGORITHM, key, sealed.subarray(0, IV_BYTES), {
    authTagLength: TAG_BYTES,
  });
  decipher.setAAD(Buffer.from(context, 'utf8'));
  decipher.setAuthTag(sealed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]);
  } catch {
    throw new SecretsKeyError(
      `${context}: the sealed value does not open (altered, or moved from another row)`,
    );
  }
}

function parse(stored: string): { keyId: string; wrapped: Buffer; ciphertext: Buffer } {
  const parts = isSealed(stored) ? stored.slice(PREFIX.length).split(':') : [];
  const [keyId, wrapped, ciphertext] = parts;
  if (parts.length !== 3 || keyId === undefined || wrapped === undefined || ciphertext === undefined)
    throw new SecretsKeyError('not a sealed value');
  return {
    keyId,
    wrapped: Buffer.from(wrapped, 'base64url'),
    ciphertext: Buffer.from(ciphertext, 'base64url'),
  };
}

/** The standalone key file's name in DATA_DIR. */
export const SECRETS_KEY_FILE_NAME = 'secrets-key';

const KEY_FILE_HEADER =
  '# Key-encryption keys of the secrets at rest (docs/secrets.md): one "<key id> <base64 of 32 bytes>" a line;\n' +
  '# the first seals, every one opens. Losing this file loses the signing keys and webhook secrets.\n';

/** A new key file's text: one fresh key (`orderctl rotate-secrets-key` and the docs say how to add one). */
export function newSecretsKeyFile(
  id = `k${new Date().toISOString().slice(0, 10).replaceAll('-', '')}-${randomBytes(3).toString('hex')}`,
): string {
  return `${KEY_FILE_HEADER}${id} ${randomBytes(KEY_BYTES).toString('base64')}\n`;
}

/**
 * Reads the key file that `setting` names. Anything wrong with it is a one-line {@link StartupError}
 * naming the setting: missing, unreadable, a line that is not `<key id> <base64 of 32 bytes>`, no key.
 */
export async function loadSecretsKeyring(
  file: string,
  setting = 'SECRETS_KEY_FILE',
): Promise<SecretsKeyring> {
  const where = `${setting}=${file}`;
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    throw new StartupError(
      `${where}: cannot read the secrets key file (${(error as NodeJS.ErrnoException).code}); set ${setting} to the file that holds the key-encryption keys`,
    );
  }
  const keys: SecretsKey[] = [];
  for (const [index, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const [id, encoded, ...rest] = line.split(/\s+/);
    const key = encoded === undefined ? undefined : Buffer.from(encoded, 'base64');
    if (id === undefined || !KEY_ID.test(id) || key?.length !== KEY_BYTES || rest.length > 0)
      throw new StartupError(
        `${where}: line ${index + 1} is not "<key id> <base64 of ${KEY_BYTES} bytes>" (make a key with: openssl rand -base64 ${KEY_BYTES})`,
      );
    if (keys.some((k) => k.id === id))
      throw new StartupError(`${where}: key id ${id} appears twice (line ${index + 1})`);
    keys.push({ id, key });
  }
  const [first, ...others] = keys;
  if (first === undefined) throw new StartupError(`${where}: the file holds no key`);
  return new SecretsKeyring([first, ...others], where, setting);
}

/**
 * Standalone without SECRETS_KEY_FILE: the key file in DATA_DIR, generated 0600 on first start so that
 * it survives restarts (API.md §12). Returns its path.
 */
export async function standaloneSecretsKeyFile(dataDir: string): Promise<string> {
  const directory = resolve(dataDir);
  const file = join(directory, SECRETS_KEY_FILE_NAME);
  await mkdir(directory, { recursive: true });
  try {
    // `wx`: two first starts racing keep the one file written first.
    await writeFile(file, newSecretsKeyFile(), { mode: 0o600, flag: 'wx' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  return file;
}

/**
 * A text column that holds sealed secrets, and its row's key: the context a value is sealed for is
 * the table and the row's key ({@link sealedContext}), not the column, so that a value may move between
 * the columns of its row (a webhook's secret becomes its previous secret on rotation).
 */
export interface SealedColumn {
  /** Schema-qualified: `auth.signing_keys`. */
  readonly table: string;
  /** The row's key columns: `['kid']`, `['org_id', 'key']`. */
  readonly key: readonly string[];
  readonly column: string;
}

/** The context a row's secret is sealed for: its table and key (key values as text, as pg reads bigints). */
export function sealedContext(table: string, key: readonly (string | number)[]): string {
  return `${table}:${JSON.stringify(key.map(String))}`;
}

/** Rows read and re-sealed per statement by {@link resealColumn}. */
const RESEAL_BATCH = 500;

/** A stored value that no key of the keyring opens, named by where it is (never by what it holds). */
export interface UnopenedSecret {
  /** `webhooks.endpoints.secret` */
  readonly column: string;
  /** The row's key: `webhook_id=7`. */
  readonly row: string;
  /** Why it does not open: its key id is not among the keys, or the value was altered. */
  readonly reason: string;
}

/** What {@link resealColumn} did. */
export interface Resealed {
  /** Rows it changed. */
  readonly resealed: number;
  /** Values it left as they are because no key opens them. */
  readonly unopened: readonly UnopenedSecret[];
}

function checkedNames(column: SealedColumn): void {
  for (const name of [column.table, ...column.key, column.column])
    if (!/^[a-z_]+(\.[a-z_]+)?$/.test(name)) throw new Error(`not an SQL name: ${name}`);
}

/** `table.column` */
export function columnName(column: SealedColumn): string {
  return `${column.table}.${column.column}`;
}

/** The condition on `column` of the values {@link resealColumn} changes, `$1` the current key's prefix. */
function notUnderCurrentKey(column: SealedColumn): string {
  return `${column.column} IS NOT NULL AND ${column.column} <> '' AND ${column.column} NOT LIKE $1`;
}

/**
 * Seals every clear value of a column and re-wraps every value sealed under another key than the
 * keyring's current one, in batches of {@link RESEAL_BATCH} rows, while the platform runs: each row is
 * written only if it still holds the value read (a concurrent change, sealed under the current key
 * anyway, wins). A value no key opens is left as it is and named in the result. `onProgress` hears
 * after each batch how many rows it has looked at. Empty values (an idempotency key held by a running
 * request) are left alone.
 */
export async function resealColumn(
  pool: Pool,
  keyring: SecretsKeyring,
  column: SealedColumn,
  onProgress?: (examined: number) => void,
): Promise<Resealed> {
  checkedNames(column);
  const keys = column.key.join(', ');
  const current = `${PREFIX}${keyring.currentId}:%`;
  let after: string[] | undefined;
  let resealed = 0;
  let examined = 0;
  const unopened: UnopenedSecret[] = [];
  for (;;) {
    const from =
      after === undefined ? '' : `AND (${keys}) > (${column.key.map((_, i) => `$${i + 2}`).join(', ')})`;
    const { rows } = await pool.query<Record<string, string>>(
      `SELECT ${keys}, ${column.column} AS value FROM ${column.table}
        WHERE ${notUnderCurrentKey(column)} ${from}
        ORDER BY ${keys} LIMIT ${RESEAL_BATCH}`,
      [current, ...(after ?? [])],
    );
    for (const row of rows) {
      const key = column.key.map((k) => String(row[k]));
      const value = row.value!;
      let next: string;
      try {
        next = keyring.rewrap(value, sealedContext(column.table, key));
      } catch (error) {
        if (!(error instanceof SecretsKeyError)) throw error;
        unopened.push({
          column: columnName(column),
          row: column.key.map((k, i) => `${k}=${key[i]}`).join(' '),
          reason: error.message,
        });
        continue;
      }
      const updated = await pool.query(
        `UPDATE ${column.table} SET ${column.column} = $1
          WHERE ${column.key.map((k, i) => `${k} = $${i + 3}`).join(' AND ')} AND ${column.column} = $2`,
        [next, value, ...key],
      );
      resealed += updated.rowCount ?? 0;
    }
    examined += rows.length;
    onProgress?.(examined);
    const last = rows.at(-1);
    if (last === undefined || rows.length < RESEAL_BATCH) return { resealed, unopened };
    after = column.key.map((k) => String(last[k]));
  }
}

/** How many values of a column are sealed under each key id (`null`: stored in clear). */
export async function sealedKeyCounts(
  pool: Pool,
  column: SealedColumn,
): Promise<{ keyId: string | null; count: number }[]> {
  checkedNames(column);
  const { rows } = await pool.query<{ key_id: string | null; count: number }>(
    `SELECT CASE WHEN ${column.column} LIKE $1 THEN split_part(${column.column}, ':', 3) END AS key_id,
            count(*)::int AS count
       FROM ${column.table} WHERE ${column.column} IS NOT NULL AND ${column.column} <> ''
      GROUP BY 1 ORDER BY 1`,
    [`${PREFIX}%`],
  );
  return rows.map((row) => ({ keyId: row.key_id, count: row.count }));
}

/** How many values of a column {@link resealColumn} would look at. */
export async function countNotUnderCurrentKey(
  pool: Pool,
  keyring: SecretsKeyring,
  column: SealedColumn,
): Promise<number> {
  checkedNames(column);
  const { rows } = await pool.query<{ count: number }>(
    `SELECT count(*)::int AS count FROM ${column.table} WHERE ${notUnderCurrentKey(column)}`,
    [`${PREFIX}${keyring.currentId}:%`],
  );
  return rows[0]!.count;
}

/**
 * Start-up check that the keyring opens what is stored: one value sealed under each key id a column
 * holds. A value that does not open is a one-line {@link StartupError} naming the keyring's setting (a
 * wrong or missing key-encryption key), before the service serves anything.
 */
export async function checkSealedColumn(
  pool: Pool,
  keyring: SecretsKeyring,
  column: SealedColumn,
): Promise<void> {
  const keys = column.key.join(', ');
  const { rows } = await pool.query<Record<string, string>>(
    `SELECT DISTINCT ON (split_part(${column.column}, ':', 3)) ${keys}, ${column.column} AS value
       FROM ${column.table} WHERE ${column.column} LIKE $1`,
    [`${PREFIX}%`],
  );
  for (const row of rows) {
    const key = column.key.map((k) => String(row[k]));
    try {
      keyring.open(row.value!, sealedContext(column.table, key));
    } catch (error) {
      if (!(error instanceof SecretsKeyError)) throw error;
      throw new StartupError(
        `${keyring.source}: the secrets stored in ${column.table} do not open with these keys (${error.message}); set ${keyring.setting} to the key file that sealed them`,
      );
    }
  }
}
