import { randomUUID } from 'node:crypto';
import {
  createIntegrator,
  RUN_MODES,
  searchPath,
  startTestPlatform,
  startWebhookReceiver,
  stockOf,
  type Integrator,
  type RunningPlatform,
  type WebhookReceiver,
} from '@ofp/testing';

// Returns (API.md §6, §8) over HTTP, as an integrator and the fulfillment operator see them: the
// state machine with its derived receiving statuses, the scopes of each move, received `restock`
// quantities on hand as soon as the receiving PUT has answered, `return.received`, and `q`.

type Json = Record<string, unknown> & { id: number; version: number; status?: string };

const WAREHOUSE = 'RETURNS-DOCK';

/** Follow-on changes cross Kafka twice in the distributed shape (to the process manager, to the projector). */
const SCENARIO_TIMEOUT_MS = 180_000;

describe.each(RUN_MODES)('returns over HTTP ($mode)', ({ mode }) => {
  let platform: RunningPlatform;
  /** An integrator and fulfillment operator in one: read, write and operations. */
  let acme: Integrator;
  /** Another organization's integrator-only client: read and write. */
  let shop: Integrator;
  /** Acme's endpoint subscribed to return.received. */
  let receiver: WebhookReceiver;
  let secret = '';

  beforeAll(async () => {
    platform = await startTestPlatform(mode, {
      KAFKA_TOPIC_PREFIX: `e2e.${randomUUID().slice(0, 8)}.`,
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    });
    acme = await createIntegrator(platform, { name: 'Acme' });
    shop = await createIntegrator(platform, { name: 'Shop', scopes: ['read', 'write'] });
    receiver = await startWebhookReceiver({ secrets: () => [secret] });
    const webhook = await acme.request<Json>('POST', '/v2/webhooks', {
      body: { url: receiver.url, events: ['return.received'] },
    });
    expect(webhook.status).toBe(201);
    secret = String(webhook.body.results.secret);
  }, 180_000);
  afterAll(async () => {
    await receiver?.close();
    await platform?.stop();
  }, 60_000);

  async function write(method: string, path: string, body: unknown, as: Integrator = acme) {
    const response = await as.request<Json>(method, path, { body });
    return { status: response.status, errors: response.body.errors, results: response.body.results };
  }

  async function search(filters: unknown[], order?: unknown[]): Promise<string[]> {
    const response = await acme.request<Json[]>('GET', searchPath('returns', { filters, order }));
    expect(response.status).toBe(200);
    return response.body.results.map((record) => String(record.rma_number));
  }

  const line = (sku: string, quantity: number, disposition: string, quantity_received?: number) => ({
    sku,
    quantity,
    disposition,
    ...(quantity_received === undefined ? {} : { quantity_received }),
  });

  it(
    'moves a return from requested to closed, receiving restock lines into on_hand and announcing return.received',
    async () => {
      const created = await write('POST', '/v2/returns', {
        rma_number: 'RMA-1',
        warehouse: WAREHOUSE,
        reason: 'damaged in transit',
        lines: [line('MUG-1', 3, 'restock'), line('MUG-2', 2, 'dispose')],
      });
      expect(created).toMatchObject({ status: 201, errors: null });
      const rma = created.results;
      expect(rma).toMatchObject({
        rma_number: 'RMA-1',
        status: 'requested',
        received_at: null,
        version: 1,
        lines: [
          { sku: 'MUG-1', quantity: 3, quantity_received: 0, disposition: 'restock' },
          { sku: 'MUG-2', quantity: 2, quantity_received: 0, disposition: 'dispose' },
        ],
      });
      const path = `/v2/returns/${rma.id}`;
      expect(await write('POST', '/v2/returns', { rma_number: 'RMA-1', lines: [] })).toMatchObject({
        status: 409,
      });
      expect(
        await write('POST', '/v2/returns', { rma_number: 'RMA-X', status: 'received', lines: [] }),
      ).toEqual({
        status: 422,
        errors: { status: ['cannot be set to received: the system sets it'] },
        results: null,
      });
      expect(
        await write('PUT', path, { lines: [line('MUG-1', 3, 'restock', 1), line('MUG-2', 2, 'dispose')] }),
      ).toMatchObject({ status: 409, errors: { status: ['cannot receive while requested'] } });

      expect(await write('PUT', path, { status: 'authorized' })).toMatchObject({
        status: 200,
        results: { status: 'authorized', version: 2 },
      });
      expect(await write('PUT', path, { status: 'partially_received' })).toEqual({
        status: 422,
        errors: { status: ['cannot be set to partially_received: the system sets it'] },
        results: null,
      });

      // Receiving: what a restock line receives is on hand when the PUT has answered; disposed goods never are.
      const part = await write('PUT', path, {
        lines: [line('MUG-1', 3, 'restock', 2), line('MUG-2', 2, 'dispose', 1)],
      });
      expect(part).toMatchObject({
        status: 200,
        results: { status: 'partially_received', received_at: null },
      });
      expect(await stockOf(acme, 'MUG-1', WAREHOUSE)).toEqual({
        on_hand: 2,
        committed: 0,
        available: 2,
        inbound: 0,
      });
      expect(await stockOf(acme, 'MUG-2', WAREHOUSE)).toBeUndefined();
      expect(
        await write('PUT', path, { lines: [line('MUG-1', 3, 'restock', 1), line('MUG-2', 2, 'dispose', 1)] }),
      ).toEqual({
        status: 422,
        errors: { 'lines[0].quantity_received': ['cannot decrease: 2 received'] },
        results: null,
      });
      expect(
        await write('PUT', path, { lines: [line('MUG-1', 3, 'restock', 4), line('MUG-2', 2, 'dispose', 1)] }),
      ).toEqual({
        status: 422,
        errors: { 'lines[0].quantity_received': ['must be at most the quantity 3'] },
        results: null,
      });

      const full = await write('PUT', path, {
        lines: [line('MUG-1', 3, 'restock', 3), line('MUG-2', 2, 'dispose', 2)],
      });
      expect(full).toMatchObject({ status: 200, results: { status: 'received' } });
      expect(full.results.received_at).toEqual(expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/));
      expect(await stockOf(acme, 'MUG-1', WAREHOUSE)).toMatchObject({ on_hand: 3, available: 3 });
      expect(await stockOf(acme, 'MUG-2', WAREHOUSE)).toBeUndefined();

      await receiver.waitFor((received) => received.some((r) => r.payload?.data.id === rma.id), 30_000);
      const delivered = receiver.received.filter((r) => r.payload?.data.id === rma.id);
      expect(delivered.map((r) => [r.verified, r.payload?.type, r.payload?.sequence])).toEqual([
        [true, 'return.received', full.results.version],
      ]);
      expect(delivered[0]!.payload).toMatchObject({
        data: { status: 'received', rma_number: 'RMA-1' },
        previous_attributes: { status: 'partially_received', received_at: null },
      });

      expect(await write('PUT', path, { status: 'refunded' })).toMatchObject({
        status: 200,
        results: { status: 'refunded' },
      });
      expect(await write('PUT', path, { status: 'cancelled' })).toEqual({
        status: 409,
        errors: { status: ['cannot move from refunded to cancelled'] },
        results: null,
      });
      expect(await write('PUT', path, { status: 'closed' })).toMatchObject({
        status: 200,
        results: { status: 'closed' },
      });
    },
    SCENARIO_TIMEOUT_MS,
  );

  it(
    'lets an integrator-only token ask for and cancel a return, never authorize, reject or receive it',
    async () => {
      const created = await write(
        'POST',
        '/v2/returns',
        { rma_number: 'RMA-S1', warehouse: WAREHOUSE, lines: [line('TEE-1', 1, 'restock')] },
        shop,
      );
      expect(created).toMatchObject({ status: 201, results: { status: 'requested' } });
      const path = `/v2/returns/${created.results.id}`;
      for (const status of ['authorized', 'rejected'])
        expect(await write('PUT', path, { status }, shop)).toEqual({
          status: 403,
          errors: { base: ['The access token lacks the operations scope'] },
          results: null,
        });
      expect(await write('PUT', path, { reason: 'changed mind' }, shop)).toMatchObject({ status: 200 });
      expect(await write('PUT', path, { status: 'cancelled' }, shop)).toMatchObject({
        status: 200,
        results: { status: 'cancelled', reason: 'changed mind' },
      });
      // Another organization's return is unknown to Acme.
      expect(await write('PUT', path, { status: 'authorized' })).toMatchObject({ status: 404 });
    },
    SCENARIO_TIMEOUT_MS,
  );

  it(
    'finds returns by q on their columns and, with dot syntax, on their lines',
    async () => {
      for (const [rma_number, reason, lines] of [
        ['RMA-Q1', 'wrong size', [line('SHOE-1', 1, 'restock'), line('SHOE-2', 1, 'dispose')]],
        ['RMA-Q2', 'damaged', [line('SHOE-2', 1, 'restock')]],
        ['RMA-Q3', 'damaged', [line('SHOE-3', 2, 'dispose')]],
      ] as const)
        expect(
          await write('POST', '/v2/returns', { rma_number, reason, warehouse: 'Q-DOCK', lines }),
        ).toMatchObject({ status: 201 });
      const q = (operand: string, value: unknown, operator = '=') => ({ operand, operator, value });
      const byNumber = [{ column: 'rma_number', direction: 'asc' }];
      expect(await search([q('warehouse', 'Q-DOCK'), q('reason', 'damaged')], byNumber)).toEqual([
        'RMA-Q2',
        'RMA-Q3',
      ]);
      expect(await search([q('warehouse', 'Q-DOCK'), q('status', 'requested')], byNumber)).toEqual([
        'RMA-Q1',
        'RMA-Q2',
        'RMA-Q3',
      ]);
      expect(await search([q('lines.sku', 'SHOE-2')], byNumber)).toEqual(['RMA-Q1', 'RMA-Q2']);
      // Filters on the same relation match the same line: SHOE-2 is disposed of only in RMA-Q1.
      expect(await search([q('lines.sku', 'SHOE-2'), q('lines.disposition', 'dispose')])).toEqual(['RMA-Q1']);
      expect(await search([q('warehouse', 'Q-DOCK'), q('lines.quantity', 2, '>=')])).toEqual(['RMA-Q3']);
      const unknown = await acme.request('GET', searchPath('returns', { filters: [q('lines.nope', 1)] }));
      expect(unknown.status).toBe(400);
    },
    SCENARIO_TIMEOUT_MS,
  );
});
