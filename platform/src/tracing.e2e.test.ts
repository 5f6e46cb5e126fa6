import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createIntegrator,
  startTestPlatform,
  startWebhookReceiver,
  type Integrator,
  type RunningPlatform,
  type WebhookReceiver,
} from '@ofp/testing';

// Issue 15: one trace from a request to the webhook it causes, across the distributed shape's
// processes and Kafka (API.md §8 `traceparent`, §9 `ce_traceparent`), exported over OTLP/HTTP (JSON)
// to a receiver in this test.

/** An OTLP/JSON attribute value (only the kinds the platform's spans carry). */
interface AttributeValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
}

interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  service: string;
  attributes?: { key: string; value: AttributeValue }[];
}

/** A span's attributes as plain values (OTLP/JSON sends 64-bit integers as strings). */
function attributesOf(span: ExportedSpan): Record<string, string | number | boolean | undefined> {
  return Object.fromEntries(
    (span.attributes ?? []).map(({ key, value }) => [
      key,
      value.stringValue ?? (value.intValue === undefined ? value.boolValue : Number(value.intValue)),
    ]),
  );
}

/** An OTLP/HTTP trace receiver: keeps every span exported to `POST /v1/traces`. */
async function startOtlpReceiver(): Promise<{
  url: string;
  spans: ExportedSpan[];
  close: () => Promise<void>;
}> {
  const spans: ExportedSpan[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        resourceSpans?: {
          resource?: { attributes?: { key: string; value: { stringValue?: string } }[] };
          scopeSpans?: { spans?: Omit<ExportedSpan, 'service'>[] }[];
        }[];
      };
      for (const resource of body.resourceSpans ?? []) {
        const service =
          resource.resource?.attributes?.find((a) => a.key === 'service.name')?.value.stringValue ?? '';
        for (const scope of resource.scopeSpans ?? [])
          for (const span of scope.spans ?? []) spans.push({ ...span, service });
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    spans,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const SPAN_KIND_SERVER = 2;

describe('one trace from a write to its webhook (distributed)', () => {
  let otlp: Awaited<ReturnType<typeof startOtlpReceiver>>;
  let platform: RunningPlatform;
  let acme: Integrator;
  let receiver: WebhookReceiver;
  let secret = '';

  beforeAll(async () => {
    otlp = await startOtlpReceiver();
    platform = await startTestPlatform('distributed', {
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '200',
    });
    acme = await createIntegrator(platform, { name: 'Traced' });
    receiver = await startWebhookReceiver({ secrets: () => [secret] });
    const webhook = await acme.request<{ secret: string }>('POST', '/v2/webhooks', {
      body: { url: receiver.url, events: ['fulfillment_order.created'] },
    });
    secret = webhook.body.results.secret;
    // The api's first request fetches the token keys and opens its connections, within the request's
    // 3 s database deadline: on a loaded machine that first write can answer 503 (its Retry-After is
    // the client's to follow). One read first, so the traced write is an ordinary one.
    expect((await acme.request('GET', '/v2/fulfillment_orders')).status).toBe(200);
  }, 180_000);
  afterAll(async () => {
    await receiver?.close();
    await platform?.stop();
    await otlp?.close();
  }, 60_000);

  it('holds the HTTP span, the append, the relay, the projector, the process manager and the webhook POST', async () => {
    const fo = await acme.request<{ id: number }>('POST', '/v2/fulfillment_orders', {
      body: { warehouse: 'MAIN', lines: [{ sku: 'TRACE-1', quantity: 2 }] },
    });
    expect(fo.status).toBe(201);
    await receiver.waitFor(
      (received) => received.some((r) => r.payload?.data.id === fo.body.results.id),
      30_000,
    );
    const delivery = receiver.received.find((r) => r.payload?.data.id === fo.body.results.id)!;
    const traceparent = delivery.traceparent;
    expect(traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
    const traceId = traceparent!.split('-')[1]!;

    const expected = [
      'process projector',
      'process process-manager.inventory',
      'publish outbox',
      'process webhook-dispatcher',
      'webhook POST',
    ];
    const deadline = Date.now() + 20_000;
    let names: string[] = [];
    while (Date.now() < deadline) {
      const inTrace = otlp.spans.filter((span) => span.traceId === traceId);
      names = inTrace.map((span) => span.name);
      const appended = inTrace.some((span) => /INSERT/i.test(span.name) || span.name.startsWith('pg'));
      const served = inTrace.some((span) => span.kind === SPAN_KIND_SERVER && span.service === 'ofp-api');
      if (appended && served && expected.every((name) => names.includes(name))) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const inTrace = otlp.spans.filter((span) => span.traceId === traceId);
    expect(inTrace.some((span) => span.kind === SPAN_KIND_SERVER && span.service === 'ofp-api')).toBe(true);
    expect(inTrace.some((span) => span.service === 'ofp-api' && span.name.startsWith('pg'))).toBe(true);
    for (const name of expected) expect({ name, found: names.includes(name) }).toEqual({ name, found: true });
    // Spans say what happened: the route and operation on the server span, what a command wrote, the
    // messaging of each batch, named statements on pg spans.
    const serverSpan = inTrace.find((span) => span.kind === SPAN_KIND_SERVER && span.service === 'ofp-api')!;
    expect({ name: serverSpan.name, ...attributesOf(serverSpan) }).toMatchObject({
      name: 'POST /v2/fulfillment_orders',
      'http.route': '/v2/fulfillment_orders',
      'ofp.operation_id': 'fulfillment_orders.create',
    });
    const command = inTrace.find((span) => span.name === 'command fulfillment_orders.create')!;
    expect(attributesOf(command)).toMatchObject({
      'ofp.record.type': 'fulfillment_orders',
      'ofp.record.id': fo.body.results.id,
      'ofp.organization.id': acme.organizationId,
    });
    const projected = inTrace.find((span) => span.name === 'process projector')!;
    expect(attributesOf(projected)).toMatchObject({
      'messaging.system': 'kafka',
      'messaging.operation.type': 'process',
      'messaging.consumer.group.name': 'projector',
    });
    expect(attributesOf(projected)['messaging.batch.message_count']).toBeGreaterThanOrEqual(1);
    expect(attributesOf(inTrace.find((span) => span.name === 'publish outbox')!)).toMatchObject({
      'messaging.system': 'kafka',
      'messaging.operation.type': 'send',
    });
    const statements = inTrace.filter((span) => span.name.startsWith('pg.query:')).map((span) => span.name);
    expect(statements.some((name) => name.startsWith('pg.query:insert_es.events_'))).toBe(true);
    // Every process on the way took part (the auth service too, when the api fetched its keys).
    const services = new Set(inTrace.map((span) => span.service));
    for (const service of ['ofp-api', 'ofp-projector', 'ofp-webhook-dispatcher'])
      expect({ service, found: services.has(service) }).toEqual({ service, found: true });
  }, 90_000);
});
