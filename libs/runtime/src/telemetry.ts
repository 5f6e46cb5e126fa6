import type { Module } from './lifecycle.js';
import { register } from 'node:module';

/** Probes and scrapes, asked every few seconds: tracing them would bury the traces people look for. */
const UNTRACED_PATHS = new Set(['/livez', '/readyz', '/metrics']);

/**
 * Starts the OpenTelemetry NodeSDK when `OTEL_EXPORTER_OTLP_ENDPOINT` is set. Call it first in a
 * process entry point and import everything else afterwards (dynamic import), so that the
 * instrumentations hook http and pg before those modules load. Returns a shutdown function.
 *
 * The SDK exports what OpenTelemetry's own variables say (docs/configuration.md): traces, the
 * instrumentations' metrics and the logs (pino's records, through its instrumentation), each over
 * OTLP unless `OTEL_TRACES_EXPORTER`, `OTEL_METRICS_EXPORTER` or `OTEL_LOGS_EXPORTER` is `none`;
 * the protocol from `OTEL_EXPORTER_OTLP_PROTOCOL` (http/protobuf unless set).
 */
export async function startTelemetry(
  env: Readonly<Record<string, string | undefined>>,
  serviceName: string,
): Promise<() => Promise<void>> {
  if (!env.OTEL_EXPORTER_OTLP_ENDPOINT) return async () => {};
  // ESM modules are instrumented through import-in-the-middle's loader hook.
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url);
  const { NodeSDK } = await import('@opentelemetry/sdk-node');
  const { getNodeAutoInstrumentations } = await import('@opentelemetry/auto-instrumentations-node');
  const sdk = new NodeSDK({
    serviceName: env.OTEL_SERVICE_NAME ?? serviceName,
    instrumentations: [
      getNodeAutoInstrumentations({
        '@opentelemetry/instrumentation-fs': { enabled: false },
        // Background work (bus polling, health checks, the delivery workers' claims) makes no trace of
        // its own: a query is a span only inside a request's or an event's trace.
        '@opentelemetry/instrumentation-pg': { requireParentSpan: true },
        '@opentelemetry/instrumentation-net': { enabled: false },
        '@opentelemetry/instrumentation-dns': { enabled: false },
        '@opentelemetry/instrumentation-http': {
          ignoreIncomingRequestHook: (request) => UNTRACED_PATHS.has(request.url ?? ''),
        },
      }),
    ],
  });
  sdk.start();
  return () => sdk.shutdown();
}

/**
 * Telemetry as a module of the graph: the SDK starts before anything is imported (see
 * {@link startTelemetry}), and this module, which every other depends on through `database`, flushes
 * and shuts it down last.
 */
export function telemetryModule(shutdown: () => Promise<void>): Module {
  let stopped = false;
  return {
    name: 'telemetry',
    start: () => Promise.resolve(),
    async stop() {
      stopped = true;
      await shutdown();
    },
    ready: () => !stopped,
  };
}
