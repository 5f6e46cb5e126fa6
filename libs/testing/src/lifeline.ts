import { spawn } from 'node:child_process';
import type { Socket } from 'node:net';

/** A shell that does its work once this process is gone. */
export interface Lifeline {
  /** Gives the shell a line on its stdin (e.g. a pid it should know of), to read after its wait. */
  tell(line: string): void;
  /** Lets the shell do its work now (this process is done with what it watches). */
  end(): void;
}

/**
 * Runs `script` (POSIX sh; `args` are its `$1`...) once this process is gone, however it ends, even by
 * SIGKILL or a crash, when none of its own cleanup runs: the shell first reads its stdin, a pipe only
 * this process holds open, to end-of-file, which the kernel gives it when this process exits (the lines
 * {@link Lifeline.tell} wrote are on it). Detached, so that a Ctrl-C in the terminal reaches this
 * process alone; unreferenced, so that it does not keep this process running.
 */
export function lifeline(script: string, args: readonly string[]): Lifeline {
  const shell = spawn('sh', ['-c', script, 'lifeline', ...args], {
    detached: true,
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  shell.unref();
  (shell.stdin as Socket).unref();
  // Should the shell be gone already, a write to it must not throw.
  shell.stdin.on('error', () => {});
  return { tell: (line) => void shell.stdin.write(`${line}\n`), end: () => shell.stdin.end() };
}

/**
 * Once this process is gone: the postmaster of the Postgres cluster at `location` is stopped
 * (immediate shutdown; its pid from `postmaster.pid`, taken only if that process runs with `-D
 * <location>`, as a pid may have been given to another process since), then `paths` are deleted. For
 * an embedded Postgres that a harness started (the chaos run): its watchdog is in the harness's
 * process, and a harness that died, of a crash or SIGKILL, left it running.
 */
export function stopPostgresWithThisProcess(location: string, paths: readonly string[]): Lifeline {
  return lifeline(
    `
while read -r _; do :; done
pid=$(head -n 1 "$1/postmaster.pid" 2>/dev/null)
if [ -n "$pid" ] && tr '\\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "-D $1 "; then
  kill -QUIT "$pid"
  i=0
  while [ "$i" -lt 100 ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
  kill -KILL "$pid" 2>/dev/null
fi
shift
rm -rf "$@"
`,
    [location, ...paths],
  );
}
