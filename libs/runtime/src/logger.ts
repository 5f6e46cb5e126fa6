import { pino, type Logger, type LevelWithSilent } from 'pino';
import { trace } from '@opentelemetry/api';

export type { Logger };

/**
 * JSON logs (pino). Every line carries the service name; lines written inside a traced request also
 * carry the trace and span ids of the active OpenTelemetry span.
 */
export function createLogger(options: { name: string; level: LevelWithSilent }): Logger {
  return pino({
    name: options.name,
    level: options.level,
    mixin() {
      const span = trace.getActiveSpan();
      if (!span) return {};
      const { traceId, spanId } = span.spanContext();
      return { trace_id: traceId, span_id: spanId };
    },
  });
}
