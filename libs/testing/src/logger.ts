import { createLogger, type Logger } from '@ofp/runtime';

/** Logs of code under test: quiet unless TEST_LOG_LEVEL asks for more. */
export function testLogger(name = 'test'): Logger {
  const level = (process.env.TEST_LOG_LEVEL ?? 'warn') as Parameters<typeof createLogger>[0]['level'];
  return createLogger({ name, level });
}
