import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import {
  createIntegrator,
  RUN_MODES,
  startTestPlatform,
  startWebhookReceiver,
  type Integrator,
  type RunningPlatform,
  type WebhookReceiver,
} from '@ofp/testing';

// Issue 15: after a scripted workload, the processes' /metrics have every metric that the chart's
// Grafana dashboard and alert rules use, with plausible values: lag back to 0, deliveries counted.

const CHART = fileURLToPath(new URL('../../charts/ofp/files/', import.meta.url));

/**
 * Names of PromQL series selectors in `text`: identifiers followed by `{`, and histogram suffixes cut.
 * Recording rules' names (`ofp:slo_errors:ratio_rate5m`) are Prometheus's, not the processes'.
 */
function metricsUsedIn(text: string): Set<string> {
  const names = new Set<string>();
  for (const [, name] of text.matchAll(/(?<![\w:])([a-z_][a-z0-9_]*)\{/g)) {
    // `up` is Prometheus's own, about the scrape; the rest come from the processes.
    if (name === 'up') continue;
    names.add(name!.replace(/_(bucket|count|sum)$/, ''));
  }
  return names;
}

/** A scrape: the metric families (`# TYPE` lines) and the samples, by name with labels. */
function parseScrape(text: string): { families: Set<string>; samples: Map<string, number> } {
  const families = new Set<string>();
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) /.exec(line);
    if (type) families.add(type[1]!);
    else if (line && !line.startsWith('#')) {
      const at = line.lastIndexOf(' ');
      samples.set(line.slice(0, at), Number(line.slice(at + 1)));
    }
  }
  return { families, samples };
}

/** The sum of the samples of `name` whose labels include every one of `labels`. */
function total(samples: Map<string, number>, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const [series, value] of samples) {
    if (!series.startsWith(`${name}{`) && series !== name) continue;
    if (Object.entries(labels).every(([key, wanted]) => series.includes(`${key}="${wanted}"`))) sum += value;
  }
  return sum;
}

describe.each(RUN_MODES)('metrics after a workload ($mode)', ({ mode }) => {
  let platform: RunningPlatform;
  let acme: Integrator;
  let receiver: WebhookReceiver;
  let secret = '';

  beforeAll(async () => {
    platform = await startTestPlatform(mode, { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
    acme = await createIntegrator(platform, { name: 'Watched' });
    receiver = await startWebhookReceiver({ secrets: () => [secret] });
  }, 180_000);
  afterAll(async () => {
    await receiver?.close();
    await platform?.stop();
  }, 60_000);

  async function scrapeAll() {
    const texts = await Promise.all(
      Object.values(platform.processes).map(async (url) => (await fetch(`${url}/metrics`)).text()),
    );
    return parseScrape(texts.join('\n'));
  }

  // A counter whose series appears at its first event shows no increase() for that event: the chart's
  // alert on the first disabled endpoint after a pod start never fired. Known label values start at 0.
  it('counts every known label value from 0 before its first event, and tells that its dependencies answer', async () => {
    const { samples } = await scrapeAll();
    /** The values of the series of `name` that carry every one of `labels`. */
    const values = (name: string, labels: Record<string, string>): number[] =>
      [...samples]
        .filter(([series]) => series.startsWith(`${name}{`))
        .filter(([series]) =>
          Object.entries(labels).every(([key, value]) => series.includes(`${key}="${value}"`)),
        )
        .map(([, value]) => value);
    for (const reason of ['gone', 'failing'])
      expect(values('webhook_endpoints_disabled_total', { reason })).toEqual([0]);
    for (const outcome of ['succeeded', 'retrying', 'failed'])
      expect(values('webhook_delivery_attempts_total', { outcome })).toEqual([0]);
    for (const reason of ['revoked', 'expired', 'missing', 'unavailable'])
      expect(values('auth_token_verification_failures_total', { reason }).length).toBeGreaterThan(0);
    expect(values('read_your_writes_wait_seconds_count', { outcome: 'timed_out' })).toEqual([0]);
    expect(values('dependency_up', { dependency: 'postgres' }).length).toBeGreaterThan(0);
    expect(values('dependency_up', { dependency: 'postgres' }).every((value) => value === 1)).toBe(true);
    if (mode === 'distributed') {
      expect(values('dependency_up', { dependency: 'kafka' }).length).toBeGreaterThan(0);
      expect(values('dependency_up', { dependency: 'kafka' }).every((value) => value === 1)).toBe(true);
    }
  });

  it('has every metric the dashboard and the alerts use, with lag back to 0 and deliveries counted', async () => {
    const webhook = await acme.request<{ secret: string }>('POST', '/v2/webhooks', {
      body: { url: receiver.url, events: ['fulfillment_order.created', 'inventory.created'] },
    });
    secret = webhook.body.results.secret;
    const fo = await acme.request<{ id: number }>('POST', '/v2/fulfillment_orders', {
      body: { warehouse: 'MAIN', lines: [{ sku: 'WATCH-1', quantity: 3 }] },
    });
    expect(fo.status).toBe(201);
    expect(
      (await fetch(`${platform.apiUrl}/v2/people`, { headers: { authorization: 'Bearer nope' } })).status,
    ).toBe(401);
    await receiver.waitFor((received) => received.filter((r) => r.verified).length >= 2, 30_000);

    const used = new Set([
      ...metricsUsedIn(await readFile(`${CHART}dashboard.json`, 'utf8')),
      ...metricsUsedIn(await readFile(`${CHART}alerts.yaml`, 'utf8')),
    ]);
    expect(used.size).toBeGreaterThan(10);

    // Deliveries are recorded once the receiver has answered: scrape until the counts are in.
    let scrape = await scrapeAll();
    for (let i = 0; i < 100; i++) {
      const lagging = total(scrape.samples, 'bus_consumer_lag_events');
      const delivered = total(scrape.samples, 'webhook_delivery_attempts_total', { outcome: 'succeeded' });
      const queued = total(scrape.samples, 'webhook_delivery_queue_depth');
      if (lagging === 0 && delivered >= 2 && queued === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
      scrape = await scrapeAll();
    }
    // The outbox and the Kafka clients exist where Kafka does: standalone has neither.
    const kafkaOnly = (name: string) => name.startsWith('outbox_') || name.startsWith('kafka_client_');
    const expected = [...used].filter((name) => mode === 'distributed' || !kafkaOnly(name));
    const missing = expected.filter((name) => !scrape.families.has(name));
    expect(missing).toEqual([]);

    expect(total(scrape.samples, 'bus_consumer_lag_events')).toBe(0);
    const groups = [...scrape.samples.keys()]
      .filter((series) => series.startsWith('bus_consumer_lag_events{'))
      .map((series) => /group="([^"]+)"/.exec(series)?.[1]);
    expect(new Set(groups)).toEqual(
      new Set([
        'projector',
        'process-manager.inventory',
        'process-manager.order-progress',
        'webhook-dispatcher',
      ]),
    );
    expect(
      total(scrape.samples, 'webhook_delivery_attempts_total', { outcome: 'succeeded' }),
    ).toBeGreaterThanOrEqual(2);
    expect(total(scrape.samples, 'webhook_delivery_queue_depth')).toBe(0);
    expect(
      total(scrape.samples, 'read_your_writes_wait_seconds_count', { outcome: 'caught_up' }),
    ).toBeGreaterThanOrEqual(2);
    expect(total(scrape.samples, 'read_your_writes_wait_seconds_count', { outcome: 'timed_out' })).toBe(0);
    expect(
      total(scrape.samples, 'auth_tokens_issued_total', { grant_type: 'client_credentials' }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      total(scrape.samples, 'auth_token_verification_failures_total', { reason: 'malformed' }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      total(scrape.samples, 'http_request_duration_seconds_count', {
        route: '/v2/fulfillment_orders',
        status: '201',
      }),
    ).toBe(1);
    if (mode === 'distributed') {
      expect(total(scrape.samples, 'outbox_events')).toBe(0);
      // The relay's failed batches, each cause a series from the start.
      const failures = [...scrape.samples.keys()].filter((series) =>
        series.startsWith('outbox_relay_failures_total{'),
      );
      expect(failures.map((series) => /cause="(\w+)"/.exec(series)?.[1]).sort()).toEqual([
        'fatal',
        'other',
        'unconfirmed',
      ]);
    }
  }, 90_000);
});
