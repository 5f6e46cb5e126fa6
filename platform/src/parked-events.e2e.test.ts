import { randomUUID } from 'node:crypto';
import type { RecordChange } from '@ofp/contracts';
import { EventStore } from '@ofp/event-store';
import {
  RUN_MODES,
  createIntegrator,
  runCommand,
  startTestPlatform,
  until,
  type Integrator,
  type TestPlatform,
} from '@ofp/testing';

// Parked events through the platform (API.md §12, issue 23 item 3), for every consumer group it runs:
// the projector, each process manager and the webhook intake, on the Postgres-log bus (standalone) and
// on Kafka (distributed). One event of one record that a consumer cannot apply is parked with its
// consumer and reason, the gauge shows it, the record's later event waits behind it and a write to the
// record answers 503, while later events of other records and organizations are applied and the
// group's lag returns to 0; once the cause is fixed, orderctl's retry applies both in order, the gauge
// returns to 0 and the record takes writes again.
//
// The fault is the consumer's own: its table refuses the record's change (a trigger, standing in for a
// constraint or migration gone wrong in what only that consumer writes), so every other consumer
// applies the same event, and the fix is the operator's (dropping it). The record's two events are
// appended straight to the event store, together, so that the second is on the bus before the first
// is parked, as events that arrive while a consumer retries are.

/** A consumer group of the platform, and where it records how far it has applied each stream. */
interface Consumer {
  readonly group: string;
  /** The process that runs it distributed (standalone: the one process). */
  readonly process: 'projector' | 'api' | 'webhook-dispatcher';
  /** The table it writes, in the transaction of everything it does for an event, with the stream's version. */
  readonly table: string;
  /** That table's column of the stream's version. */
  readonly version: string;
  /** Which of the table's rows (`row`) are this consumer's. */
  readonly mine: (row: string) => string;
}

const CONSUMERS: readonly Consumer[] = [
  {
    group: 'projector',
    process: 'projector',
    table: 'read.stream_versions',
    version: 'version',
    mine: () => 'true',
  },
  {
    group: 'process-manager.inventory',
    process: 'api',
    table: 'api.handled_streams',
    version: 'version',
    mine: (row) => `${row}.manager = 'inventory'`,
  },
  {
    group: 'process-manager.order-progress',
    process: 'api',
    table: 'api.handled_streams',
    version: 'version',
    mine: (row) => `${row}.manager = 'order-progress'`,
  },
  {
    group: 'webhook-dispatcher',
    process: 'webhook-dispatcher',
    table: 'webhooks.webhook_deliveries',
    version: 'sequence',
    mine: () => 'true',
  },
];

/** Longest wait for a consumer to apply or park an event (4 attempts take under a second). */
const WAIT_MS = 30_000;

interface ParkedJson {
  id: number;
  consumer_group: string;
  event_id: string;
  stream_id: string;
  version: number;
  organization_id: number;
  reason: string;
  attempts: number;
  waiting: number;
}

describe.each(RUN_MODES)('parked events of every consumer group ($mode)', ({ mode }) => {
  let platform: TestPlatform;
  let store: EventStore;
  let alice: Integrator;
  let bob: Integrator;
  const orders = new Map<Integrator, number>();

  /**
   * A write of the test's own, sent again while it answers 503 (API.md §3: retry after Retry-After), as
   * the first writes to a freshly started platform may on a loaded machine (its cold connections and
   * token keys count against the request's database deadline). Not for a write whose 503 is the point.
   */
  const write = <R>(integrator: Integrator, method: string, path: string, body: unknown) =>
    until(
      `${method} ${path} answered other than 503`,
      WAIT_MS,
      () => integrator.request<R>(method, path, { body }),
      (response) => response.status !== 503,
    );

  beforeAll(async () => {
    platform = await startTestPlatform(mode, { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
    store = new EventStore(platform.database.pool, { outbox: mode === 'distributed' });
    alice = await createIntegrator(platform, { name: 'Alice' });
    bob = await createIntegrator(platform, { name: 'Bob' });
    for (const integrator of [alice, bob]) {
      // Every event is the intake's to turn into deliveries (to nowhere: they wait for their retries).
      const webhook = await write(integrator, 'POST', '/v2/webhooks', {
        url: 'http://127.0.0.1:9/hook',
        events: ['*'],
      });
      expect(webhook.status).toBe(201);
      const order = await write<{ id: number }>(integrator, 'POST', '/v2/orders', {
        order_number: `SO-${randomUUID()}`,
        lines: [{ sku: 'SKU-1', quantity: 2 }],
      });
      expect(order.status).toBe(201);
      orders.set(integrator, order.body.results.id);
    }
    await platform.database.pool.query(`
      CREATE FUNCTION public.refuse_stream() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'stream % refused', NEW.stream_id; END $$`);
  }, 180_000);
  afterAll(async () => {
    await platform?.stop();
  }, 60_000);

  /** A fulfillment order of the integrator's order: every consumer group applies its events. */
  const fulfillmentOrder = async (integrator: Integrator): Promise<string> => {
    const created = await write<{ id: number }>(integrator, 'POST', '/v2/fulfillment_orders', {
      order_id: orders.get(integrator),
      warehouse: 'W1',
      lines: [{ sku: 'SKU-1', quantity: 2 }],
    });
    expect(created.status).toBe(201);
    return `fulfillment_orders-${created.body.results.id}`;
  };

  /** The last version of `stream` the consumer applied (0 for none). */
  const applied = async (consumer: Consumer, stream: string): Promise<number> => {
    const { rows } = await platform.database.pool.query<{ version: number | null }>(
      `SELECT max(${consumer.version}) AS version FROM ${consumer.table} t WHERE stream_id = $1 AND ${consumer.mine('t')}`,
      [stream],
    );
    return rows[0]?.version ?? 0;
  };
  const appliedUpTo = (consumer: Consumer, stream: string, version: number) =>
    until(
      `${consumer.group} to apply ${stream} v${version}`,
      WAIT_MS,
      () => applied(consumer, stream),
      (v) => v >= version,
    );

  /** A gauge of `group` as the process running the consumer shows it (0 when it shows none). */
  const gauge = async (consumer: Consumer, name: string): Promise<number> => {
    const url = platform.processes[mode === 'standalone' ? 'all' : consumer.process];
    const text = await (await fetch(`${url}/metrics`)).text();
    const line = new RegExp(`^${name}\\{[^}]*\\bgroup="${consumer.group}"[^}]*\\} (\\S+)$`, 'm').exec(text);
    return line ? Number(line[1]) : 0;
  };

  const orderctl = async (...args: string[]): Promise<{ results: unknown }> => {
    const run = await runCommand(
      [process.execPath, 'services/auth/dist/cli/orderctl.js', '--json', ...args],
      {
        env: { ORDERCTL_URL: platform.adminUrl, ADMIN_TOKEN: platform.adminToken },
      },
    );
    if (run.code !== 0) throw new Error(`orderctl ${args.join(' ')}: ${run.code} ${run.stderr}`);
    return JSON.parse(run.stdout) as { results: unknown };
  };
  const parkedOf = async (consumer: Consumer): Promise<ParkedJson[]> =>
    (await orderctl('list-parked-events', '--group', consumer.group)).results as ParkedJson[];

  /** The consumer's table refuses the stream's changes from now on, until {@link fix}. */
  const refuse = async (consumer: Consumer, stream: string): Promise<void> => {
    await platform.database.pool.query(`
      CREATE TRIGGER refuse_stream BEFORE INSERT ON ${consumer.table} FOR EACH ROW
        WHEN (NEW.stream_id = '${stream}' AND ${consumer.mine('NEW')})
        EXECUTE FUNCTION public.refuse_stream()`);
  };
  const fix = async (consumer: Consumer): Promise<void> => {
    await platform.database.pool.query(`DROP TRIGGER IF EXISTS refuse_stream ON ${consumer.table}`);
  };

  /** Appends two updates of the fulfillment order to its stream at once: they move it to W2, then W3. */
  const appendTwoUpdates = async (stream: string, orgId: number): Promise<[string, string]> => {
    const head = (await store.readStreamHead(stream))!;
    const change = head.data as RecordChange;
    const update = (version: number, warehouse: string, before: string) => ({
      eventId: randomUUID(),
      type: head.type.replace(/\.created$/, '.updated'),
      data: { ...change, record: { ...change.record, version, warehouse }, previous: { warehouse: before } },
    });
    const events = [update(2, 'W2', 'W1'), update(3, 'W3', 'W2')];
    await store.append({ streamId: stream, streamType: head.streamType, expectedVersion: 1, orgId, events });
    return [events[0]!.eventId, events[1]!.eventId];
  };

  afterEach(async () => {
    for (const consumer of CONSUMERS) await fix(consumer);
  });

  it.each(CONSUMERS)(
    '$group parks an event it cannot apply and goes on with every other',
    async (consumer) => {
      const stream = await fulfillmentOrder(alice);
      await appliedUpTo(consumer, stream, 1);
      await refuse(consumer, stream);
      const [poisoned, behind] = await appendTwoUpdates(stream, alice.organizationId);

      // Parked with its consumer and reason, the next event of its record behind it (once the bus has
      // handed that one over too: on Kafka it may come in a later batch).
      const [parked] = await until(
        'the parked event, one waiting behind it',
        WAIT_MS,
        () => parkedOf(consumer),
        (p) => p[0]?.waiting === 1,
      );
      expect(parked).toMatchObject({
        consumer_group: consumer.group,
        event_id: poisoned,
        stream_id: stream,
        version: 2,
        organization_id: alice.organizationId,
        reason: `P0001: stream ${stream} refused`,
        attempts: 4,
        waiting: 1,
      });
      const { rows: held } = await platform.database.pool.query(
        'SELECT consumer_group, event_id, version, reason FROM es.parked_events WHERE stream_id = $1 ORDER BY version',
        [stream],
      );
      expect(held).toEqual([
        expect.objectContaining({ consumer_group: consumer.group, event_id: poisoned, version: 2 }),
        { consumer_group: consumer.group, event_id: behind, version: 3, reason: null },
      ]);
      await until(
        'the gauge',
        WAIT_MS,
        () => gauge(consumer, 'ofp_parked_events'),
        (n) => n === 1,
      );

      // Later events of other records, of its organization and of another, are applied; the group is not behind.
      const others = [await fulfillmentOrder(alice), await fulfillmentOrder(bob)];
      for (const other of others) await appliedUpTo(consumer, other, 1);
      await until(
        'no lag',
        WAIT_MS,
        () => gauge(consumer, 'bus_consumer_lag_events'),
        (lag) => lag === 0,
      );

      // The record's own later event waits, and a write to it is refused (nothing appended).
      expect(await applied(consumer, stream)).toBe(1);
      const id = stream.slice('fulfillment_orders-'.length);
      const refused = await alice.request('PATCH', `/v2/fulfillment_orders/${id}`, {
        body: { warehouse: 'W4' },
      });
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('60');
      expect(refused.body.errors?.base?.[0]).toContain(`${poisoned} is parked by ${consumer.group}`);
      expect((await store.readStreamHead(stream))?.version).toBe(3);

      // Fixed, then retried with orderctl: both events are applied, in order, and the record goes on.
      await fix(consumer);
      expect(await orderctl('retry-parked-event', '--id', String(parked!.id))).toMatchObject({
        results: { id: parked!.id, retry_requested_at: expect.any(String) },
      });
      await appliedUpTo(consumer, stream, 3);
      const shown = await alice.request<{ warehouse: string }>('GET', `/v2/fulfillment_orders/${id}`);
      expect(shown.body.results.warehouse).toBe('W3');
      expect(await parkedOf(consumer)).toEqual([]);
      await until(
        'the gauge back to 0',
        WAIT_MS,
        () => gauge(consumer, 'ofp_parked_events'),
        (n) => n === 0,
      );
      const written = await write(alice, 'PATCH', `/v2/fulfillment_orders/${id}`, { warehouse: 'W4' });
      expect(written.status).toBe(200);
      await appliedUpTo(consumer, stream, 4);
    },
    120_000,
  );
});
