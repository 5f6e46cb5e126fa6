import { spawn } from 'node:child_process';

// runUntilSignal in a process of its own, as `npm start` runs it (a signal sent to jest's worker would
// end the test run). Its one module says when it started and when it was stopped.
const PROGRAM = `
import { ModuleRunner, createLogger, runUntilSignal } from '@ofp/runtime';
const logger = createLogger({ name: 'signals', level: 'silent' });
// What keeps it running until stopped, as a server or a database does.
let running;
const module = {
  name: 'embedded-postgres',
  start: async () => {
    running = setInterval(() => {}, 60_000);
    process.stdout.write('started\\n');
  },
  stop: async () => {
    clearInterval(running);
    process.stdout.write('stopped\\n');
  },
  ready: () => true,
};
await runUntilSignal(new ModuleRunner([module], logger), logger);
`;

describe('runUntilSignal', () => {
  // SIGHUP: the terminal of an `npm start` closed. Unhandled, it ended the process at once and left the
  // embedded Postgres (a detached process group, which the hangup does not reach) running.
  it.each(['SIGTERM', 'SIGINT', 'SIGHUP'] as const)(
    'stops every module on %s, then exits 0',
    async (signal) => {
      const child = spawn(process.execPath, ['--input-type=module', '-e', PROGRAM], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let output = '';
      const started = new Promise<void>((resolve) =>
        child.stdout.on('data', (chunk: Buffer) => {
          output += chunk.toString();
          if (output.includes('started\n')) resolve();
        }),
      );
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        child.once('exit', (code, by) => resolve({ code, signal: by })),
      );
      await started;
      child.kill(signal);
      expect(await exited).toEqual({ code: 0, signal: null });
      expect(output).toBe('started\nstopped\n');
    },
    30_000,
  );
});
