import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Gauge, type Registry } from 'prom-client';
import type { Logger } from './logger.js';
import { schemaTransaction } from './migrations.js';
import { StartupError } from './preflight.js';
import type { Pool, PoolClient } from './postgres.js';
import {
  checkSealedColumn,
  columnName,
  countNotUnderCurrentKey,
  loadSecretsKeyring,
  resealColumn,
  sealedKeyCounts,
  type SealedColumn,
  type SecretsKeyring,
  type UnopenedSecret,
} from './secrets-at-rest.js';

/**
 * Rotating the key-encryption key while the platform serves (API.md §12, docs/secrets.md), as key rings
 * are rotated in the field (Tink's keysets, Vault's transit keys): the new key is added to every
 * replica's ring, then made the one that seals; `orderctl rotate-secrets-key` re-wraps every stored
 * value under it; then the old key is retired. Every process re-reads its key file while it runs
 * ({@link secretsKeyFileWatch}), so none of these steps needs a restart.
 *
 * Two tables, schema `secrets`, laid out at start:
 * - `sealed_columns`: every column that holds sealed values, declared at start by the service that
 *   owns it, so that the rotation re-seals them all without knowing the services;
 * - `key_holders`: every running process that holds a keyring, with its key ids and the one it seals
 *   with, written again every {@link HOLDER_REFRESH_MS}. The rotation re-seals nothing until every
 *   holder seen lately seals with the new key: a replica that could not open what it writes, or that
 *   would seal new values under the old key behind it, makes it wait, then refuse, naming the replica.
 */

/** How often a process reads its key file again and says which keys it holds. */
export const HOLDER_REFRESH_MS = 5_000;
/** A holder not heard from for this long has stopped (crashed: a clean stop removes its row). */
const HOLDER_STALE_SECONDS = 20;

async function layOut(client: PoolClient): Promise<void> {
  await client.query(`
    CREATE SCHEMA IF NOT EXISTS secrets;
    CREATE TABLE IF NOT EXISTS secrets.sealed_columns (
      table_name text NOT NULL,
      column_name text NOT NULL,
      key_columns text[] NOT NULL,
      PRIMARY KEY (table_name, column_name));
    CREATE TABLE IF NOT EXISTS secrets.key_holders (
      holder text PRIMARY KEY,
      key_ids text[] NOT NULL,
      sealing_key_id text NOT NULL,
      seen_at timestamptz NOT NULL)`);
}

/** Records the columns a service keeps sealed values in, for `orderctl rotate-secrets-key`. */
export async function declareSealedColumns(pool: Pool, columns: readonly SealedColumn[]): Promise<void> {
  await schemaTransaction(pool, async (client) => {
    await layOut(client);
    for (const column of columns)
      await client.query(
        `INSERT INTO secrets.sealed_columns (table_name, column_name, key_columns) VALUES ($1, $2, $3)
         ON CONFLICT (table_name, column_name) DO UPDATE SET key_columns = EXCLUDED.key_columns`,
        [column.table, column.column, column.key],
      );
  });
}

async function declaredColumns(pool: Pool): Promise<SealedColumn[]> {
  const { rows } = await pool.query<{ table_name: string; column_name: string; key_columns: string[] }>(
    'SELECT table_name, column_name, key_columns FROM secrets.sealed_columns ORDER BY 1, 2',
  );
  return rows.map((row) => ({ table: row.table_name, column: row.column_name, key: row.key_columns }));
}

/**
 * A process's keyring kept current with its key file: every {@link HOLDER_REFRESH_MS} the file is read
 * again and, if its keys changed, adopted, once they open one stored value per key id of every sealed
 * column (the start-up check's rule). A file that does not read, or whose keys would not open what is
 * stored (a key retired while values are still sealed with it), is logged with what is wrong and the
 * process keeps the keys it holds: it never loses the means to open a stored secret. Each round also
 * records the process in `secrets.key_holders`; its clean stop removes it.
 */
export function secretsKeyFileWatch(options: {
  pool: Pool;
  keyring: SecretsKeyring;
  /** The key file, and the setting that names it. */
  file: string;
  setting: string;
  /** The process, as the rotation names it when it waits for it: its TARGET. */
  name: string;
  logger: Logger;
  /** Where `secrets_key_file_refused` goes. */
  metrics?: Registry;
}): { start: () => Promise<void>; stop: () => Promise<void> } {
  const { pool, keyring, logger } = options;
  const refused = options.metrics
    ? new Gauge({
        name: 'secrets_key_file_refused',
        help: 'Whether the process keeps other keys than its changed secrets key file holds, since those would not open what is stored, or the file does not read (1), or holds its keys (0)',
        registers: [options.metrics],
      })
    : undefined;
  refused?.set(0);
  const holder = `${options.name}@${hostname()}:${process.pid}`;
  let timer: NodeJS.Timeout | undefined;
  let refusal: string | undefined;

  async function reload(): Promise<void> {
    let next: SecretsKeyring;
    try {
      next = await loadSecretsKeyring(options.file, options.setting);
      const same =
        next.keys.length === keyring.keys.length &&
        next.keys.every(({ id, key }, i) => keyring.keys[i]!.id === id && keyring.keys[i]!.key.equals(key));
      if (same) {
        refusal = undefined;
        refused?.set(0);
        return;
      }
      // Only a changed file costs the check's queries (one value per key id and column).
      for (const column of await declaredColumns(pool)) await checkSealedColumn(pool, next, column);
    } catch (error) {
      if (!(error instanceof StartupError)) throw error;
      if (error.message !== refusal)
        logger.error(
          `the secrets key file changed, and this process keeps the keys it holds: ${error.message}`,
        );
      refusal = error.message;
      refused?.set(1);
      return;
    }
    refusal = undefined;
    refused?.set(0);
    keyring.adopt(next);
    logger.info(
      { keyIds: keyring.ids },
      `secrets keys read again from ${options.setting}: seals with ${keyring.currentId}, opens ${keyring.ids.join(', ')}`,
    );
  }

  async function announce(): Promise<void> {
    await pool.query(
      `INSERT INTO secrets.key_holders (holder, key_ids, sealing_key_id, seen_at) VALUES ($1, $2, $3, now())
       ON CONFLICT (holder) DO UPDATE
         SET key_ids = EXCLUDED.key_ids, sealing_key_id = EXCLUDED.sealing_key_id, seen_at = now()`,
      [holder, keyring.ids, keyring.currentId],
    );
  }

  function round(): void {
    timer = setTimeout(() => {
      // Each step names its own failure: the file itself never throws here (reload logs a file that
      // does not read or would not open the stored values); what does is Postgres, during the
      // changed keys' check or the holder's record, as in any database outage.
      reload()
        .catch((error: unknown) =>
          logger.warn(
            { err: error },
            `the secrets key file changed and its keys could not be checked against the stored values; the process keeps the keys it holds and checks again in ${HOLDER_REFRESH_MS / 1000} s`,
          ),
        )
        .then(announce)
        .catch((error: unknown) =>
          logger.warn(
            { err: error },
            `could not record this process and its keys in secrets.key_holders; trying again in ${HOLDER_REFRESH_MS / 1000} s`,
          ),
        )
        .finally(() => {
          if (timer !== undefined) round();
        });
    }, HOLDER_REFRESH_MS);
    timer.unref();
  }

  return {
    async start() {
      await schemaTransaction(pool, layOut);
      await announce();
      round();
    },
    async stop() {
      clearTimeout(timer);
      timer = undefined;
      await pool
        .query('DELETE FROM secrets.key_holders WHERE holder = $1', [holder])
        .catch((error: unknown) =>
          logger.warn({ err: error }, 'could not remove this process from secrets.key_holders'),
        );
    },
  };
}

/** A running process that does not seal with the rotation's key yet. */
export interface LaggingHolder {
  readonly holder: string;
  readonly sealingKeyId: string;
  readonly keyIds: readonly string[];
}

/** The rotation did not start: processes still seal with another key (named). */
export class RotationWaitedTooLong extends Error {
  override readonly name = 'RotationWaitedTooLong';
  constructor(
    readonly keyId: string,
    readonly lagging: readonly LaggingHolder[],
  ) {
    super(
      `${lagging.length} running process(es) do not seal with key ${keyId} yet: ${lagging
        .map((h) => `${h.holder} (seals with ${h.sealingKeyId}, holds ${h.keyIds.join(', ')})`)
        .join('; ')}`,
    );
  }
}

/** What {@link rotateSecretsKey} did and left. */
export interface Rotation {
  readonly keyId: string;
  readonly columns: readonly string[];
  readonly resealed: number;
  /** Values no key opens, left as they are. */
  readonly unopened: readonly UnopenedSecret[];
  /** Values still sealed under another key (or in clear: `keyId` null) after the pass: written meanwhile. */
  readonly remaining: readonly { column: string; keyId: string | null; count: number }[];
  /** The keys of the ring other than the current one that seal nothing any more: they may be removed. */
  readonly retirable: readonly string[];
}

async function laggingHolders(pool: Pool, keyId: string): Promise<LaggingHolder[]> {
  const { rows } = await pool.query<{ holder: string; sealing_key_id: string; key_ids: string[] }>(
    `SELECT holder, sealing_key_id, key_ids FROM secrets.key_holders
      WHERE seen_at > now() - make_interval(secs => $1) AND sealing_key_id <> $2 ORDER BY holder`,
    [HOLDER_STALE_SECONDS, keyId],
  );
  return rows.map((row) => ({ holder: row.holder, sealingKeyId: row.sealing_key_id, keyIds: row.key_ids }));
}

/**
 * `orderctl rotate-secrets-key`: re-wraps every sealed value of every declared column under the
 * keyring's first key, in batches, while the platform serves. It first waits (up to `waitMs`, telling
 * `onWaiting` who it waits for) until every running process seals with that key, so that none is
 * handed a value it cannot open and none seals new values under the old key behind it; then it
 * throws {@link RotationWaitedTooLong}. Resumable: it only looks at values not sealed under the
 * current key, so a second run continues where an interrupted one stopped.
 */
export async function rotateSecretsKey(
  pool: Pool,
  keyring: SecretsKeyring,
  options: {
    waitMs: number;
    onWaiting?: (lagging: readonly LaggingHolder[]) => void;
    onProgress?: (done: number, total: number) => void;
  },
): Promise<Rotation> {
  const keyId = keyring.currentId;
  await schemaTransaction(pool, layOut);
  const deadline = Date.now() + options.waitMs;
  for (;;) {
    const lagging = await laggingHolders(pool, keyId);
    if (lagging.length === 0) break;
    if (Date.now() >= deadline) throw new RotationWaitedTooLong(keyId, lagging);
    options.onWaiting?.(lagging);
    await sleep(1_000);
  }
  const columns = await declaredColumns(pool);
  let total = 0;
  for (const column of columns) total += await countNotUnderCurrentKey(pool, keyring, column);
  let done = 0;
  let resealed = 0;
  const unopened: UnopenedSecret[] = [];
  options.onProgress?.(done, total);
  for (const column of columns) {
    const before = done;
    const result = await resealColumn(pool, keyring, column, (examined) => {
      done = before + examined;
      // Values written meanwhile under another key may add to what the count found.
      total = Math.max(total, done);
      options.onProgress?.(done, total);
    });
    resealed += result.resealed;
    unopened.push(...result.unopened);
  }
  const remaining: { column: string; keyId: string | null; count: number }[] = [];
  for (const column of columns)
    for (const { keyId: id, count } of await sealedKeyCounts(pool, column))
      if (id !== keyId) remaining.push({ column: columnName(column), keyId: id, count });
  return {
    keyId,
    columns: columns.map(columnName),
    resealed,
    unopened,
    remaining,
    retirable: keyring.ids.slice(1).filter((id) => !remaining.some((r) => r.keyId === id)),
  };
}
