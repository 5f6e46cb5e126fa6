import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { readLiveHolder, type LockHolder } from './instance-lock.js';

/**
 * What a standalone instance (TARGET=all) keeps in DATA_DIR besides its database: its lock, which
 * also tells the command-line tools where it listens and which database it uses, and the admin
 * token it generated.
 */
export const STANDALONE_FILES = { instance: 'instance.json', adminToken: 'admin-token' } as const;

export const DEFAULT_DATA_DIR = './.data';

/** What the lock file of a running standalone instance says besides its pid. */
export interface InstanceDetails {
  /** Where this machine reaches it (`http://127.0.0.1:8080`). */
  readonly url?: string;
  /** The database it uses (the embedded Postgres's, with its password: the file is mode 0600). */
  readonly database_url?: string;
}

export type RunningInstance = LockHolder & InstanceDetails;

/** The standalone instance running on `dataDir`, if one does. */
export async function findRunningInstance(dataDir: string): Promise<RunningInstance | undefined> {
  return readLiveHolder(join(resolve(dataDir), STANDALONE_FILES.instance));
}

/** Where a command-line tool finds the instance it works on, and what told it. */
export interface InstanceSettings {
  readonly dataDir: string;
  readonly running: RunningInstance | undefined;
  readonly url: { value: string; from: string } | undefined;
  readonly adminToken: { value: string; from: string } | undefined;
  readonly databaseUrl: { value: string; from: string } | undefined;
}

/**
 * The settings a command-line tool uses, each from the first place that has it: the environment
 * (`PUBLIC_URL`, else `PORT` on localhost; `ADMIN_TOKEN`; `DATABASE_URL`), else the standalone
 * instance running on `DATA_DIR` (default ./.data) and the admin token it keeps there.
 */
export async function instanceSettings(
  env: Readonly<Record<string, string | undefined>>,
): Promise<InstanceSettings> {
  const dataDir = resolve(env.DATA_DIR || DEFAULT_DATA_DIR);
  const running = await findRunningInstance(dataDir);
  const given = (name: string): { value: string; from: string } | undefined =>
    env[name] ? { value: env[name], from: name } : undefined;
  const fromInstance = (value: string | undefined): { value: string; from: string } | undefined =>
    value === undefined ? undefined : { value, from: `the instance running on ${dataDir}` };
  const tokenFile = join(dataDir, STANDALONE_FILES.adminToken);
  return {
    dataDir,
    running,
    url:
      given('PUBLIC_URL') ??
      (env.PORT ? { value: `http://localhost:${env.PORT}`, from: 'PORT' } : fromInstance(running?.url)),
    adminToken:
      given('ADMIN_TOKEN') ??
      (existsSync(tokenFile)
        ? { value: (await readFile(tokenFile, 'utf8')).trim(), from: tokenFile }
        : undefined),
    databaseUrl: given('DATABASE_URL') ?? fromInstance(running?.database_url),
  };
}
