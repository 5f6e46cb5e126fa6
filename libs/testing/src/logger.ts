import { createLogger, type Logger } from '@ofp/runtime';

/** Logs of code under test: silent unless TEST_LOG_LEVEL asks for some (expected failures in tests would otherwise read as errors). */
export function testLogger(name = 'test'): Logger {
  const level = (process.env.TEST_LOG_LEVEL ?? 'silent') as Parameters<typeof createLogger>[0]['level'];
  return createLogger({ name, level });
}
