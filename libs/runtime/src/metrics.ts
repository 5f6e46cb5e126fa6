import { Counter, Registry, collectDefaultMetrics, Histogram } from 'prom-client';

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

/** How long a scrape waits for a reading (Prometheus gives a scrape 10 s by default). */
const READING_TIMEOUT_MS = 2_000;

/**
 * A reading that several gauges of one scrape share (each gauge's `collect` asks for it): the first
 * call reads, the calls within `maxAgeMs` after get the same promise. A reading that fails or takes
 * longer than `timeoutMs` (Postgres down or hung, a broker cut off) gives undefined, and the gauges it
 * feeds keep what they last read, and is counted in `metrics_reading_failures_total{reading}` (alert
 * OfpMetricsUnreadable): one source that cannot be read never fails the whole scrape (which Prometheus
 * would take for the process being down), whose other metrics say what is wrong.
 */
export function sharedReading<T>(
  registry: Registry,
  name: string,
  read: () => Promise<T>,
  options: { maxAgeMs?: number; timeoutMs?: number } = {},
): () => Promise<T | undefined> {
  const { maxAgeMs = 1_000, timeoutMs = READING_TIMEOUT_MS } = options;
  const failures = readingFailures(registry);
  failures.inc({ reading: name }, 0);
  let reading: { at: number; value: Promise<T | undefined> } | undefined;
  const attempt = async (): Promise<T | undefined> => {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        read(),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no reading within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
    } catch {
      failures.inc({ reading: name });
      return undefined;
    } finally {
      clearTimeout(timer);
    }
  };
  return () => {
    if (!reading || Date.now() - reading.at > maxAgeMs) reading = { at: Date.now(), value: attempt() };
    return reading.value;
  };
}

/** `metrics_reading_failures_total`, one per registry, shared by its readings. */
function readingFailures(registry: Registry): Counter<'reading'> {
  const name = 'metrics_reading_failures_total';
  return (
    (registry.getSingleMetric(name) as Counter<'reading'> | undefined) ??
    new Counter({
      name,
      help: 'Scrapes in which a reading of the metrics failed or timed out; the gauges it feeds kept their last value then (the bus lag gauges were left out)',
      labelNames: ['reading'],
      registers: [registry],
    })
  );
}
