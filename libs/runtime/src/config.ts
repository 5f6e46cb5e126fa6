import { z } from 'zod';

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

/**
 * Parses the environment once with a zod object schema and returns a typed, frozen config.
 * An invalid setting throws a ConfigError naming every offending variable, so the process stops at
 * start with a message an operator can act on.
 */
export function loadConfig<S extends z.ZodObject>(
  schema: S,
  env: Readonly<Record<string, string | undefined>>,
): Readonly<z.infer<S>> {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map(
      (issue) => `  ${issue.path.join('.') || '(env)'}: ${issue.message}`,
    );
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return Object.freeze(parsed.data);
}

/** Reusable environment variable shapes. */
export const env = {
  port: (fallback: number) => z.coerce.number().int().min(0).max(65535).default(fallback),
  positiveInt: (fallback: number) => z.coerce.number().int().positive().default(fallback),
  boolean: (fallback: boolean) =>
    z
      .enum(['true', 'false', '1', '0'])
      .default(fallback ? 'true' : 'false')
      .transform((v) => v === 'true' || v === '1'),
  url: () => z.url(),
  logLevel: () => z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** `pretty` (lines for a person) or `json`; unset: pretty on a terminal, JSON otherwise ({@link logFormatFor}). */
  logFormat: () => z.enum(['json', 'pretty']).optional(),
  /** Comma-separated list, e.g. KAFKA_BROKERS=host1:9092,host2:9092. */
  list: () =>
    z
      .string()
      .min(1)
      .transform((v) =>
        v
          .split(',')
          .map((s) => s.trim())
          .filter((s) => s.length > 0),
      ),
};
