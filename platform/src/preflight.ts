import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import {
  StartupError,
  checkDatabaseReachable,
  checkPortFree,
  checkWritableDirectory,
  loadSecretsKeyring,
} from '@ofp/runtime';
import {
  LockHeldError,
  STANDALONE_FILES,
  acquireInstanceLock,
  findRunningInstance,
  type InstanceLock,
  type RunningInstance,
} from '@ofp/standalone';
import type { PlatformConfig } from './config.js';

/**
 * What a person can get wrong in the settings, found before anything is created
 * (docs/configuration.md): a second standalone instance on the same DATA_DIR, a DATA_DIR this user
 * cannot write, a PORT taken, a SECRETS_KEY_FILE that is not a key file, a DATABASE_URL that does not
 * answer. Each is a one-line StartupError.
 * The `kafka` module checks Kafka's settings next (credentials, certificates, topics), before the
 * database is opened; the embedded Postgres checks its own port and cluster when it starts. A standalone process then takes
 * DATA_DIR's instance lock, which it holds until it exits.
 */
export async function preflight(config: PlatformConfig): Promise<InstanceLock | undefined> {
  const dataDir = resolve(config.DATA_DIR);
  if (config.TARGET === 'all') {
    const running = await findRunningInstance(dataDir);
    if (running) throw alreadyRunning(config, running);
    await checkWritableDirectory('DATA_DIR', dataDir);
  }
  if (config.TARGET !== 'migrate') await checkPortFree('PORT', config.PORT, config.HOST);
  if (config.TARGET === 'auth') await checkPortFree('ADMIN_PORT', config.ADMIN_PORT, config.HOST);
  // The key file is read again by the module that uses it; a wrong one is found here, before anything is made.
  if (config.SECRETS_KEY_FILE && ['all', 'auth', 'webhook-dispatcher'].includes(config.TARGET))
    await loadSecretsKeyring(config.SECRETS_KEY_FILE, 'SECRETS_KEY_FILE');
  if (config.DATABASE_URL) await checkDatabaseReachable('DATABASE_URL', config.DATABASE_URL);
  if (config.TARGET !== 'all') return undefined;
  await mkdir(dataDir, { recursive: true });
  try {
    return await acquireInstanceLock(join(dataDir, STANDALONE_FILES.instance));
  } catch (error) {
    // Another one took it since it was read above.
    if (error instanceof LockHeldError) throw alreadyRunning(config, error.holder);
    throw error;
  }
}

function alreadyRunning(config: PlatformConfig, running: RunningInstance): StartupError {
  return new StartupError(
    `DATA_DIR=${config.DATA_DIR}: an instance is already running on it (process ${running.pid}${running.url ? `, ${running.url}` : ''}); stop it first, or set DATA_DIR to another folder to run a second one`,
  );
}
