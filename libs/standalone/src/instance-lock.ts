import { readFileSync, rmSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';

/**
 * The process that holds a lock file: its pid and, where Linux's /proc tells it, its start time, so
 * that a pid the kernel has since given to another process is not taken for the holder. What else
 * the holder wrote (its URL, say) is kept as it was written.
 */
export interface LockHolder {
  readonly pid: number;
  readonly started?: string;
  readonly [detail: string]: unknown;
}

/** The lock is held by a live process. */
export class LockHeldError extends Error {
  override readonly name = 'LockHeldError';
  constructor(
    readonly file: string,
    readonly holder: LockHolder,
  ) {
    super(`${file} is held by process ${holder.pid}`);
  }
}

export interface InstanceLock {
  readonly file: string;
  /** Rewrites the details that readers of the lock find (kept while held). */
  update(details: Readonly<Record<string, unknown>>): Promise<void>;
  /** Removes the lock file if it is still this process's. */
  release(): Promise<void>;
}

/**
 * Takes a lock file for this process: one JSON object, created only if absent, mode 0600. A file
 * left by a process that is gone is replaced; one held by a live process is a {@link LockHeldError}.
 * The file is removed when the lock is released, and at the latest when the process exits (a killed
 * process leaves it, and the next taker finds its holder gone).
 *
 * Two processes that find the same stale file at the same instant may both replace it; starting
 * twice at the same instant after a crash is left to the user.
 */
export async function acquireInstanceLock(
  file: string,
  details: Readonly<Record<string, unknown>> = {},
): Promise<InstanceLock> {
  const self = { pid: process.pid, started: startTimeOf(process.pid) };
  const content = (extra: Readonly<Record<string, unknown>>): string =>
    `${JSON.stringify({ ...extra, ...self })}\n`;
  for (let attempt = 0; ; attempt++) {
    try {
      await writeFile(file, content(details), { flag: 'wx', mode: 0o600 });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST' || attempt === 2) throw error;
    }
    const holder = await readLockHolder(file);
    if (holder && isLive(holder)) throw new LockHeldError(file, holder);
    await rm(file, { force: true });
  }
  const ours = (): boolean => {
    try {
      return (JSON.parse(readFileSync(file, 'utf8')) as LockHolder).pid === process.pid;
    } catch {
      return false;
    }
  };
  const onExit = (): void => {
    if (ours()) rmSync(file, { force: true });
  };
  process.once('exit', onExit);
  return {
    file,
    async update(more) {
      await writeFile(file, content(more), { mode: 0o600 });
    },
    async release() {
      process.removeListener('exit', onExit);
      if (ours()) await rm(file, { force: true });
    },
  };
}

/** The holder recorded in a lock file while its process lives; `undefined` when absent or stale. */
export async function readLiveHolder(file: string): Promise<LockHolder | undefined> {
  const holder = await readLockHolder(file);
  return holder && isLive(holder) ? holder : undefined;
}

async function readLockHolder(file: string): Promise<LockHolder | undefined> {
  try {
    const parsed = JSON.parse(await readFile(file, 'utf8')) as Partial<LockHolder>;
    return typeof parsed.pid === 'number' && Number.isInteger(parsed.pid) && parsed.pid > 0
      ? (parsed as LockHolder)
      : undefined;
  } catch {
    // Gone meanwhile, or not ours to read (a torn write of a crashed process): nobody holds it.
    return undefined;
  }
}

/** Whether the process recorded as `holder` still runs (the same process, not one that reuses its pid). */
export function isLive(holder: Pick<LockHolder, 'pid' | 'started'>): boolean {
  if (!processExists(holder.pid)) return false;
  const started = startTimeOf(holder.pid);
  return holder.started === undefined || started === undefined || started === holder.started;
}

export function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, under another user.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A process's start time in clock ticks since boot (`/proc/<pid>/stat`, field 22), where Linux tells it. */
function startTimeOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}
