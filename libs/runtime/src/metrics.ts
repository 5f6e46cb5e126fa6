import { Registry, collectDefaultMetrics, Histogram } from 'prom-client';

/** A Prometheus registry with the process's default metrics, one per process. */
export function createMetricsRegistry(service: string): Registry {
  const registry = new Registry();
  registry.setDefaultLabels({ service });
  collectDefaultMetrics({ register: registry });
  return registry;
}

export function createHttpMetrics(registry: Registry): Histogram<'method' | 'route' | 'status'> {
  return new Histogram({
    name: 'http_request_duration_seconds',
    help: 'HTTP request duration by method, route pattern and status code',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
}

/**
 * A reading that several gauges of one scrape share (each gauge's `collect` asks for it): the
 * first call reads, the calls within `maxAgeMs` after get the same promise.
 */
export function sharedReading<T>(read: () => Promise<T>, maxAgeMs = 1_000): () => Promise<T> {
  let reading: { at: number; value: Promise<T> } | undefined;
  return () => {
    if (!reading || Date.now() - reading.at > maxAgeMs) reading = { at: Date.now(), value: read() };
    return reading.value;
  };
}
