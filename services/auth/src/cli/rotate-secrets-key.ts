import { join } from 'node:path';
import {
  RotationWaitedTooLong,
  SECRETS_KEY_FILE_NAME,
  StartupError,
  createPool,
  loadSecretsKeyring,
  rotateSecretsKey,
} from '@ofp/runtime';
import { instanceSettings } from '@ofp/standalone';
import type { OrderctlIo } from './orderctl-io.js';

/** How often a progress line is printed while values are re-sealed. */
const PROGRESS_EVERY_MS = 2_000;

/**
 * `orderctl rotate-secrets-key` (docs/secrets.md): re-wraps every stored secret under the first key of
 * the key file, against the database itself, not the admin API (the admin API's process holds no key
 * file of the webhook dispatcher's, and a re-wrap of many rows is no request to keep open). The database
 * is DATABASE_URL, else the standalone instance's on DATA_DIR; the key file SECRETS_KEY_FILE, else
 * DATA_DIR/secrets-key. Progress on stderr, the outcome on stdout. Exit 0 when every stored secret is
 * sealed under the new key, 1 otherwise (each value that does not open named by its row).
 */
export async function rotateSecretsKeyCommand(waitSeconds: number, io: OrderctlIo): Promise<number> {
  const settings = await instanceSettings(io.env);
  if (settings.databaseUrl === undefined) {
    io.stderr(
      `orderctl: rotate-secrets-key works on the database: no instance runs on DATA_DIR ${settings.dataDir} (start it with npm start), and DATABASE_URL is not set`,
    );
    return 1;
  }
  const file = io.env.SECRETS_KEY_FILE || join(settings.dataDir, SECRETS_KEY_FILE_NAME);
  let keyring;
  try {
    keyring = await loadSecretsKeyring(file, io.env.SECRETS_KEY_FILE ? 'SECRETS_KEY_FILE' : 'DATA_DIR');
  } catch (error) {
    if (!(error instanceof StartupError)) throw error;
    io.stderr(`orderctl: ${error.message}`);
    return 1;
  }
  const pool = createPool({
    connectionString: settings.databaseUrl.value,
    applicationName: 'orderctl',
    max: 2,
  });
  const started = Date.now();
  let printed = 0;
  let waitedFor = '';
  try {
    const rotation = await rotateSecretsKey(pool, keyring, {
      waitMs: waitSeconds * 1_000,
      onWaiting(lagging) {
        const names = lagging.map((h) => `${h.holder} (seals with ${h.sealingKeyId})`).join(', ');
        if (names !== waitedFor)
          io.stderr(
            `waiting for ${lagging.length} process(es) to seal with key ${keyring.currentId}: ${names}`,
          );
        waitedFor = names;
      },
      onProgress(done, total) {
        const now = Date.now();
        if (now - printed < PROGRESS_EVERY_MS && done < total) return;
        printed = now;
        const percent = total === 0 ? 100 : Math.floor((100 * done) / total);
        io.stderr(
          `re-sealing under key ${keyring.currentId}: ${done}/${total} values (${percent}%), ${((now - started) / 1000).toFixed(1)} s`,
        );
      },
    });
    const lines = [
      `${rotation.resealed} stored secret(s) re-sealed under key ${rotation.keyId} (${rotation.columns.join(', ')}).`,
    ];
    for (const secret of rotation.unopened)
      lines.push(`does not open: ${secret.column} ${secret.row}: ${secret.reason}`);
    for (const { column, keyId, count } of rotation.remaining)
      lines.push(
        `${count} value(s) of ${column} ${keyId === null ? 'stored in clear' : `still sealed under key ${keyId}`}`,
      );
    if (rotation.unopened.length > 0)
      lines.push(
        'These values were left as they are: put the key that sealed them back into the key file and run again, or replace them (a webhook: rotate_secret; a signing key: orderctl rotate-signing-key).',
      );
    else if (rotation.remaining.length > 0) lines.push('They were written during the run: run again.');
    for (const id of rotation.retirable)
      lines.push(`Nothing is sealed under key ${id} any more: it may be removed from the key file.`);
    const complete = rotation.unopened.length === 0 && rotation.remaining.length === 0;
    (complete ? io.stdout : io.stderr)(lines.join('\n'));
    return complete ? 0 : 1;
  } catch (error) {
    if (!(error instanceof RotationWaitedTooLong)) throw error;
    io.stderr(
      `orderctl: nothing re-sealed: ${error.message}. Give every process the key file with ${error.keyId} first (each reads it again within seconds), then run again`,
    );
    return 1;
  } finally {
    await pool.end();
  }
}
