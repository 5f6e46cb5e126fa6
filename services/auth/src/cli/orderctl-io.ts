/**
 * What `orderctl` and each of its commands reach the world through: the environment, HTTP, its output
 * and its version. `orderctl.ts` passes the process's; tests pass their own.
 */
export interface OrderctlIo {
  env: Readonly<Record<string, string | undefined>>;
  fetch: typeof fetch;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  version: string;
}
