import { pino, type Logger, type LevelWithSilent } from 'pino';
import { PinoPretty } from 'pino-pretty';
import { trace } from '@opentelemetry/api';

export type { Logger };

/** `json`: one JSON object per line (pino's own). `pretty`: lines a person reads (pino-pretty). */
export type LogFormat = 'json' | 'pretty';

/** The format a process uses when `LOG_FORMAT` does not say: lines for a person on a terminal, else JSON. */
export function logFormatFor(given: LogFormat | undefined): LogFormat {
  return given ?? (process.stdout.isTTY ? 'pretty' : 'json');
}

/**
 * Logs to stdout: JSON lines (pino), or with `format: 'pretty'` readable lines written synchronously
 * on the same thread (pino-pretty as a stream, not a worker), so that text this process prints
 * itself never lands in the middle of a log line. Every line carries the service name; lines
 * written inside a traced request also carry the trace and span ids of the active OpenTelemetry span.
 */
export function createLogger(options: { name: string; level: LevelWithSilent; format?: LogFormat }): Logger {
  const settings = {
    name: options.name,
    level: options.level,
    mixin() {
      const span = trace.getActiveSpan();
      if (!span) return {};
      const { traceId, spanId } = span.spanContext();
      return { trace_id: traceId, span_id: spanId };
    },
  };
  if (options.format !== 'pretty') return pino(settings);
  return pino(
    settings,
    PinoPretty({
      sync: true,
      colorize: process.stdout.isTTY === true,
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: 'pid,hostname,name',
      singleLine: true,
    }),
  );
}
