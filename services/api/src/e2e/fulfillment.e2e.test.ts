import { randomUUID } from 'node:crypto';
import { platformFetch } from '@ofp/client';
import {
  createIntegrator,
  RUN_MODES,
  searchPath,
  startTestPlatform,
  stockOf,
  type Integrator,
  type RunningPlatform,
} from '@ofp/testing';

// The order-fulfillment domain over HTTP (API.md §5, §6): what integrators come for, end to end.

type Json = Record<string, unknown> & { id: number; version: number; status?: string };
interface Line {
  sku: string;
  quantity: number;
  quantity_shipped?: number;
  quantity_received?: number;
}

const WAREHOUSE = 'MAIN';

type Client = Pick<Integrator, 'request'>;

/**
 * Another client of the integrator's organization with other scopes (an integrator's own system
 * beside the fulfillment operator's), registered through the admin API, with a client-credentials token.
 */
async function anotherClient(
  platform: RunningPlatform,
  of: Integrator,
  scopes: readonly string[],
): Promise<Client> {
  const registered = await fetch(`${platform.adminUrl}/admin/organizations/${of.organizationId}/clients`, {
    method: 'POST',
    headers: { authorization: `Bearer ${platform.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'integrator', redirect_uri: 'http://localhost:3000/callback', scopes }),
  });
  const client = ((await registered.json()) as { results: { client_id: string; client_secret: string } })
    .results;
  const issued = await fetch(`${platform.authUrl}/oauth/token`, {
    method: 'POST',
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      client_id: client.client_id,
      client_secret: client.client_secret,
    }),
  });
  const { access_token: token } = (await issued.json()) as { access_token: string };
  return {
    async request(method, path, options = {}) {
      const response = await fetch(`${platform.apiUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(options.body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(options.body === undefined ? {} : { body: JSON.stringify(options.body) }),
      });
      const text = await response.text();
      return {
        status: response.status,
        headers: response.headers,
        body: text ? JSON.parse(text) : null,
        text,
      };
    },
  };
}

/**
 * Writes as the SDK's transport sends them (`@ofp/client`): each with an `Idempotency-Key`, sent again
 * with it after a 503 once its `Retry-After` has passed (API.md §3: the answer of a database that is
 * overloaded; §5: the key makes the retried write happen once). Every try's answer is kept, so that a
 * test sees what the platform answered under contention, not only the last answer.
 */
function retryingWriter(platform: RunningPlatform, as: Integrator) {
  const tries: { status: number; retryAfter: string | null }[] = [];
  const send = platformFetch({
    // Up to 9 retries: under load (20 on 2 cores) many writes queue for the api's 10 connections.
    retry: { maxAttempts: 10 },
    fetch: async (request) => {
      const response = await fetch(request);
      tries.push({ status: response.status, retryAfter: response.headers.get('retry-after') });
      return response;
    },
  });
  return {
    tries,
    async post(path: string, body: unknown): Promise<number> {
      const response = await send(
        new Request(`${platform.apiUrl}${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${as.accessToken}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        }),
      );
      await response.body?.cancel();
      return response.status;
    },
  };
}

/**
 * The tries answered otherwise than a write's outcome (201, 409, 422) or the contract's 503 with
 * `Retry-After`: none may be (a 500, a 503 without `Retry-After`, a timeout of the request itself).
 */
function overloadAnswers(tries: readonly { status: number; retryAfter: string | null }[]) {
  return tries.filter(
    ({ status, retryAfter }) => ![201, 409, 422].includes(status) && !(status === 503 && retryAfter !== null),
  );
}

const address = { name: 'Ada', address1: '1 Quay', city: 'Port', postal_code: '1000', country: 'US' };

/** Follow-on changes cross Kafka twice in the distributed shape (to the process manager, to the projector). */
const SCENARIO_TIMEOUT_MS = 180_000;

describe.each(RUN_MODES)('order fulfillment over HTTP ($mode)', ({ mode }) => {
  let platform: RunningPlatform;
  /** An integrator and fulfillment operator in one: read, write and operations. */
  let acme: Integrator;
  /** The same organization's integrator-only client: read and write. */
  let integratorOnly: Client;

  beforeAll(async () => {
    // Topics of this run only in both modes: the standalone process inherits KAFKA_BROKERS from the
    // test environment, and consumer groups on shared topics would take other runs' events.
    platform = await startTestPlatform(mode, { KAFKA_TOPIC_PREFIX: `e2e.${randomUUID().slice(0, 8)}.` });
    acme = await createIntegrator(platform, { name: 'Acme' });
    integratorOnly = await anotherClient(platform, acme, ['read', 'write']);
  }, 180_000);
  afterAll(async () => {
    await platform?.stop();
  }, 60_000);

  async function created(model: string, body: unknown, as: Client = acme): Promise<Json> {
    const response = await as.request<Json>('POST', `/v2/${model}`, { body });
    expect({ status: response.status, errors: response.body.errors }).toEqual({ status: 201, errors: null });
    return response.body.results;
  }

  async function updated(model: string, id: number, body: unknown): Promise<Json> {
    const response = await acme.request<Json>('PUT', `/v2/${model}/${id}`, { body });
    expect({ status: response.status, errors: response.body.errors }).toEqual({ status: 200, errors: null });
    return response.body.results;
  }

  async function refused(method: string, path: string, body: unknown, as: Client = acme) {
    const response = await as.request(method, path, body === undefined ? {} : { body });
    return { status: response.status, errors: response.body.errors, allow: response.headers.get('allow') };
  }

  async function search(model: string, filters: unknown[]): Promise<number[]> {
    const response = await acme.request<Json[]>('GET', searchPath(model, { filters }));
    expect(response.status).toBe(200);
    return response.body.results.map((record) => record.id);
  }

  /**
   * What a write derives (inventory, an order's status) is visible when its response has arrived
   * (API.md §5): read once, never polled.
   */
  async function shows<T>(read: () => Promise<T>, expected: unknown): Promise<void> {
    expect(await read()).toEqual(expected);
  }

  async function statusOf(model: string, id: number): Promise<string | undefined> {
    return (await acme.request<Json>('GET', `/v2/${model}/${id}`)).body.results.status;
  }

  /**
   * 10 of `sku` counted in, then an open order of `quantity` with one fulfillment order, shipped in full
   * in one package; resolves once the order is `fulfilled`.
   */
  async function shippedOrder(sku: string, orderNumber: string, quantity: number) {
    await created('inventory_adjustments', {
      sku,
      warehouse: WAREHOUSE,
      quantity_delta: 10,
      reason: 'count',
    });
    const order = await created('orders', {
      order_number: orderNumber,
      status: 'open',
      lines: [{ sku, quantity }],
    });
    const fo = await created('fulfillment_orders', {
      order_id: order.id,
      warehouse: WAREHOUSE,
      lines: [{ sku, quantity }],
    });
    const shipment = await created('shipments', {
      fulfillment_order_id: fo.id,
      packages: [{ tracking_number: `T-${orderNumber}`, lines: [{ sku, quantity }] }],
    });
    await shows(() => statusOf('orders', order.id), 'fulfilled');
    return { order, fo, shipment };
  }

  it(
    'receives a purchase order into inventory, fulfils an order in two shipments, and invoices it',
    async () => {
      const sku = 'WIDGET-1';
      const item = await created('items', { sku, name: 'Widget' });

      // Purchase order: inbound while open, on hand once received.
      const po = await created('purchase_orders', {
        po_number: 'PO-1',
        vendor_name: 'Parts Inc',
        warehouse: WAREHOUSE,
        lines: [{ sku, quantity: 100, unit_cost: '2.50' }],
      });
      expect(po).toMatchObject({ status: 'draft', total: '250.00', lines: [{ quantity_received: 0 }] });
      await updated('purchase_orders', po.id, { status: 'open' });
      await shows(() => stockOf(acme, sku, WAREHOUSE), {
        on_hand: 0,
        committed: 0,
        available: 0,
        inbound: 100,
      });
      const receive = (quantity_received: number) => ({
        lines: [{ sku, quantity: 100, unit_cost: '2.50', quantity_received }],
      });
      expect(await refused('PUT', `/v2/purchase_orders/${po.id}`, receive(60), integratorOnly)).toMatchObject(
        {
          status: 403,
        },
      );
      expect(await updated('purchase_orders', po.id, receive(60))).toMatchObject({
        status: 'partially_received',
      });
      expect(await refused('PUT', `/v2/purchase_orders/${po.id}`, receive(50))).toEqual({
        status: 422,
        errors: { 'lines[0].quantity_received': ['cannot decrease: 60 received'] },
        allow: null,
      });
      expect(await refused('PUT', `/v2/purchase_orders/${po.id}`, receive(101))).toMatchObject({
        status: 422,
        errors: { 'lines[0].quantity_received': ['must be at most the quantity 100'] },
      });
      expect(await updated('purchase_orders', po.id, receive(100))).toMatchObject({ status: 'received' });
      await shows(() => stockOf(acme, sku, WAREHOUSE), {
        on_hand: 100,
        committed: 0,
        available: 100,
        inbound: 0,
      });
      const inventory = (
        await acme.request<Json[]>(
          'GET',
          searchPath('inventory', {
            filters: [{ operand: 'item.name', operator: '=', value: 'Widget' }],
          }),
        )
      ).body.results;
      expect(inventory).toMatchObject([{ sku, item_id: item.id }]);

      // An order and its fulfillment order: committed up, available down.
      const order = await created('orders', {
        order_number: 'SO-1',
        currency: 'USD',
        ship_to: address,
        lines: [{ item_id: item.id, sku, quantity: 8, unit_price: '10.00' }],
      });
      expect(order).toMatchObject({ status: 'pending', total: '80.00' });
      await updated('orders', order.id, { status: 'open' });
      const fo = await created('fulfillment_orders', {
        order_id: order.id,
        warehouse: WAREHOUSE,
        ship_to: address,
        lines: [{ sku, quantity: 8 }],
      });
      expect(fo).toMatchObject({ status: 'open', lines: [{ sku, quantity: 8, quantity_shipped: 0 }] });
      await shows(() => stockOf(acme, sku, WAREHOUSE), {
        on_hand: 100,
        committed: 8,
        available: 92,
        inbound: 0,
      });

      // The anticipated ship date, found by q.
      await updated('orders', order.id, { anticipated_ship_date: '2026-12-01' });
      await updated('fulfillment_orders', fo.id, { anticipated_ship_date: '2026-12-01' });
      const shipDate = [{ operand: 'anticipated_ship_date', operator: '=', value: '2026-12-01' }];
      expect(await search('orders', shipDate)).toEqual([order.id]);
      expect(await search('fulfillment_orders', shipDate)).toEqual([fo.id]);
      expect(await search('orders', [{ operand: 'ship_to.country', operator: '=', value: 'US' }])).toEqual([
        order.id,
      ]);

      // Two shipments of two packages each.
      const shipment = (tracking: [string, string]) => ({
        fulfillment_order_id: fo.id,
        carrier: 'UPS',
        packages: tracking.map((tracking_number) => ({ tracking_number, lines: [{ sku, quantity: 2 }] })),
      });
      expect(
        await refused('POST', '/v2/shipments', shipment(['1Z001', '1Z002']), integratorOnly),
      ).toMatchObject({
        status: 403,
      });
      const first = await created('shipments', shipment(['1Z001', '1Z002']));
      expect(first.status).toBe('label_created');
      expect((await acme.request<Json>('GET', `/v2/fulfillment_orders/${fo.id}`)).body.results).toMatchObject(
        {
          status: 'partially_shipped',
          lines: [{ quantity_shipped: 4 }],
        },
      );
      await shows(() => statusOf('orders', order.id), 'partially_fulfilled');
      await shows(() => stockOf(acme, sku, WAREHOUSE), {
        on_hand: 96,
        committed: 4,
        available: 92,
        inbound: 0,
      });
      expect(
        await refused('POST', '/v2/shipments', {
          fulfillment_order_id: fo.id,
          packages: [{ lines: [{ sku, quantity: 5 }] }],
        }),
      ).toEqual({
        status: 422,
        errors: {
          'packages[0].lines[0].quantity': [
            `ships 5 of ${sku}, but only 4 are still open on fulfillment order ${fo.id}`,
          ],
        },
        allow: null,
      });
      const second = await created('shipments', shipment(['1Z003', '1Z004']));
      expect(await statusOf('fulfillment_orders', fo.id)).toBe('shipped');
      await shows(() => statusOf('orders', order.id), 'fulfilled');
      await shows(() => stockOf(acme, sku, WAREHOUSE), {
        on_hand: 92,
        committed: 0,
        available: 92,
        inbound: 0,
      });
      expect(await refused('POST', '/v2/shipments', shipment(['1Z005', '1Z006']))).toMatchObject({
        status: 409,
      });

      // Found by tracking number, the fulfillment order through its shipments.
      const tracking = (operand: string, value: string) => [{ operand, operator: '=', value }];
      expect(await search('shipments', tracking('packages.tracking_number', '1Z003'))).toEqual([second.id]);
      expect(
        await search('fulfillment_orders', tracking('shipments.packages.tracking_number', '1Z002')),
      ).toEqual([fo.id]);
      expect(
        await search('fulfillment_orders', tracking('shipments.packages.tracking_number', 'none')),
      ).toEqual([]);
      expect(
        await search('shipments', [{ operand: 'packages.lines.sku', operator: '=', value: sku }]),
      ).toEqual([first.id, second.id]);

      // Tracking moves to delivery.
      await updated('shipments', first.id, { status: 'in_transit' });
      await updated('shipments', first.id, { status: 'out_for_delivery' });
      expect(await updated('shipments', first.id, { status: 'delivered' })).toMatchObject({
        status: 'delivered',
      });
      expect(await refused('PUT', `/v2/shipments/${first.id}`, { status: 'cancelled' })).toEqual({
        status: 409,
        errors: { status: ['cannot move from delivered to cancelled'] },
        allow: null,
      });

      // Invoice, part payment, full payment.
      const invoice = await created('invoices', {
        invoice_number: 'INV-1',
        order_id: order.id,
        currency: 'USD',
        lines: [{ sku, description: 'Widgets', quantity: 8, unit_price: '10.00' }],
      });
      expect(invoice).toMatchObject({
        status: 'open',
        total: '80.00',
        amount_paid: '0.00',
        amount_due: '80.00',
        lines: [{ amount: '80.00' }],
      });
      expect(await updated('invoices', invoice.id, { amount_paid: '30.00' })).toMatchObject({
        status: 'partially_paid',
        amount_due: '50.00',
      });
      const due = [{ operand: 'amount_due', operator: '>', value: 0 }];
      expect(await search('invoices', due)).toEqual([invoice.id]);
      expect(await refused('PUT', `/v2/invoices/${invoice.id}`, { amount_paid: '80.01' })).toMatchObject({
        status: 422,
        errors: { amount_paid: ['must be at most the total 80.00'] },
      });
      expect(await updated('invoices', invoice.id, { amount_paid: '80.00' })).toMatchObject({
        status: 'paid',
        amount_due: '0.00',
      });
      expect(await search('invoices', due)).toEqual([]);
      // API.md §5: refused "and offer a state change instead".
      expect(await refused('DELETE', `/v2/invoices/${invoice.id}`, undefined)).toEqual({
        status: 405,
        allow: 'GET, POST, PUT, PATCH',
        errors: {
          base: ['DELETE is not allowed here: an invoice is voided instead: PUT {"status": "void"}'],
        },
      });
    },
    SCENARIO_TIMEOUT_MS,
  );

  it(
    'gives a cancelled shipment’s quantities back to its fulfillment order, its order and inventory',
    async () => {
      const sku = 'GADGET-1';
      const { order, fo, shipment } = await shippedOrder(sku, 'SO-2', 3);
      await shows(() => stockOf(acme, sku, WAREHOUSE), {
        on_hand: 7,
        committed: 0,
        available: 7,
        inbound: 0,
      });
      expect(await refused('DELETE', `/v2/shipments/${shipment.id}`, undefined)).toMatchObject({
        status: 405,
        errors: {
          base: ['DELETE is not allowed here: a shipment is cancelled instead: PUT {"status": "cancelled"}'],
        },
      });
      await updated('shipments', shipment.id, { status: 'cancelled' });
      expect((await acme.request<Json>('GET', `/v2/fulfillment_orders/${fo.id}`)).body.results).toMatchObject(
        {
          status: 'in_progress',
          lines: [{ quantity_shipped: 0 }],
        },
      );
      await shows(() => statusOf('orders', order.id), 'open');
      await shows(() => stockOf(acme, sku, WAREHOUSE), {
        on_hand: 10,
        committed: 3,
        available: 7,
        inbound: 0,
      });
    },
    SCENARIO_TIMEOUT_MS,
  );

  it(
    'decides both orders again when a fulfillment order moves from one to the other',
    async () => {
      const sku = 'GIZMO-1';
      const { order: first, fo } = await shippedOrder(sku, 'SO-MOVED-FROM', 2);
      const second = await created('orders', {
        order_number: 'SO-MOVED-TO',
        status: 'open',
        lines: [{ sku, quantity: 2 }],
      });
      await updated('fulfillment_orders', fo.id, { order_id: second.id });
      await shows(() => statusOf('orders', second.id), 'fulfilled');
      await shows(() => statusOf('orders', first.id), 'open');
    },
    SCENARIO_TIMEOUT_MS,
  );

  it(
    'refuses writes a model does not take, and changes the token may not make',
    async () => {
      const inventory = await refused('POST', '/v2/inventory', { sku: 'X' });
      expect(inventory).toEqual({
        status: 405,
        allow: 'GET',
        errors: {
          base: ['POST is not allowed here: inventory changes through POST /v2/inventory_adjustments'],
        },
      });
      const adjustment = await created('inventory_adjustments', { sku: 'X', quantity_delta: 1 });
      for (const method of ['PUT', 'PATCH', 'DELETE'])
        expect(
          await refused(method, `/v2/inventory_adjustments/${adjustment.id}`, { quantity_delta: 2 }),
        ).toEqual({
          status: 405,
          allow: 'GET, POST',
          errors: {
            base: [
              `${method} is not allowed here: an adjustment is corrected by another one: POST /v2/inventory_adjustments`,
            ],
          },
        });
      const fo = await created('fulfillment_orders', { lines: [{ sku: 'X', quantity: 1 }] }, integratorOnly);
      await created('shipments', {
        fulfillment_order_id: fo.id,
        packages: [{ lines: [{ sku: 'X', quantity: 1 }] }],
      });
      expect(
        await refused('PUT', `/v2/fulfillment_orders/${fo.id}`, { status: 'closed' }, integratorOnly),
      ).toMatchObject({
        status: 403,
      });
      expect(await updated('fulfillment_orders', fo.id, { status: 'closed' })).toMatchObject({
        status: 'closed',
      });
      expect(await refused('PUT', `/v2/fulfillment_orders/${fo.id}`, { status: 'shipped' })).toEqual({
        status: 422,
        errors: { status: ['cannot be set to shipped: the system sets it'] },
        allow: null,
      });
      const order = await created('orders', { order_number: 'SO-3' });
      expect(await refused('PUT', `/v2/orders/${order.id}`, { status: 'fulfilled' })).toMatchObject({
        status: 422,
      });
      await updated('orders', order.id, { status: 'cancelled' });
      expect(await refused('PUT', `/v2/orders/${order.id}`, { status: 'open' })).toEqual({
        status: 409,
        errors: { status: ['cannot move from cancelled to open'] },
        allow: null,
      });
      const invoice = await created('invoices', {
        invoice_number: 'INV-V',
        lines: [{ quantity: 1, unit_price: '5.00' }],
      });
      await updated('invoices', invoice.id, { status: 'void' });
      expect(await refused('PUT', `/v2/invoices/${invoice.id}`, { amount_paid: '1.00' })).toEqual({
        status: 409,
        errors: { status: ['cannot pay a void invoice'] },
        allow: null,
      });
      const foreign = await createIntegrator(platform, { name: 'Other' });
      expect(
        (
          await foreign.request('POST', '/v2/shipments', {
            body: { fulfillment_order_id: fo.id, packages: [] },
          })
        ).body.errors,
      ).toEqual({ fulfillment_order_id: [`fulfillment_order ${fo.id} does not exist`] });
    },
    SCENARIO_TIMEOUT_MS,
  );

  it(
    'never ships more than ordered under 20 parallel shipments',
    async () => {
      const sku = 'RACE-1';
      const fo = await created('fulfillment_orders', {
        warehouse: WAREHOUSE,
        lines: [{ sku, quantity: 10 }],
      });
      const writer = retryingWriter(platform, acme);
      const statuses = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          writer.post('/v2/shipments', {
            fulfillment_order_id: fo.id,
            packages: [{ tracking_number: `R-${i}`, lines: [{ sku, quantity: 1 }] }],
          }),
        ),
      );
      expect(statuses.filter((status) => status === 201)).toHaveLength(10);
      expect(
        statuses.filter((status) => status !== 201).every((status) => status === 409 || status === 422),
      ).toBe(true);
      expect(overloadAnswers(writer.tries)).toEqual([]);
      const after = (await acme.request<Json & { lines: Line[] }>('GET', `/v2/fulfillment_orders/${fo.id}`))
        .body.results;
      expect(after).toMatchObject({ status: 'shipped', lines: [{ quantity: 10, quantity_shipped: 10 }] });
      const shipped = await search('shipments', [
        { operand: 'fulfillment_order_id', operator: '=', value: fo.id },
      ]);
      expect(shipped).toHaveLength(10);
    },
    SCENARIO_TIMEOUT_MS,
  );

  it(
    'ends 50 parallel adjustments of one sku at their exact sum',
    async () => {
      const sku = 'COUNT-1';
      const deltas = Array.from({ length: 50 }, (_, i) => (i % 5 === 0 ? -(i + 1) : i + 1));
      const writer = retryingWriter(platform, acme);
      const statuses = await Promise.all(
        deltas.map((quantity_delta) =>
          writer.post('/v2/inventory_adjustments', {
            sku,
            warehouse: WAREHOUSE,
            quantity_delta,
            reason: 'cycle count',
          }),
        ),
      );
      expect(statuses.every((status) => status === 201)).toBe(true);
      expect(overloadAnswers(writer.tries)).toEqual([]);
      const sum = deltas.reduce((a, b) => a + b, 0);
      await shows(() => stockOf(acme, sku, WAREHOUSE), {
        on_hand: sum,
        committed: 0,
        available: sum,
        inbound: 0,
      });
    },
    SCENARIO_TIMEOUT_MS,
  );
});
