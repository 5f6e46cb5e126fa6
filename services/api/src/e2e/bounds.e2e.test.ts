// @runs-alone: an oversized request answered within 2.5 s, timed
import {
  createIntegrator,
  searchPath,
  startTestPlatform,
  stockOf,
  type Integrator,
  type RunningPlatform,
} from '@ofp/testing';

// The bounds of API.md §1 over HTTP: what a write accepts, the read model stores and shows as written;
// what it would not hold, a write refuses with a 422 naming the field, derived totals included.

const MAX_INT32 = 2_147_483_647;

describe('bounds of the values a write takes (API.md §1)', () => {
  let platform: RunningPlatform;
  let acme: Integrator;
  let bystander: Integrator;

  beforeAll(async () => {
    platform = await startTestPlatform('standalone');
    acme = await createIntegrator(platform, { name: 'Bounds' });
    bystander = await createIntegrator(platform, { name: 'Bystander' });
  }, 180_000);
  afterAll(async () => {
    await platform?.stop();
  }, 60_000);

  it('keeps up to 4 digits of money after the point, and answers a GET with the bytes of the write', async () => {
    const created = await acme.request<{ id: number; price: string; weight: string }>('POST', '/v2/items', {
      body: { sku: 'PRECISE', price: '12.1250', weight: '0.0001' },
    });
    expect(created.status).toBe(201);
    expect(created.body.results).toMatchObject({ price: '12.125', weight: '0.0001' });
    const read = await acme.request('GET', `/v2/items/${created.body.results.id}`);
    expect(read.text).toBe(created.text);
  });

  it.each([['price'], ['weight']])(
    'refuses a %s of 140,000 digits with a 422 naming it, and every organization goes on writing and reading',
    async (column) => {
      const refused = await acme.request('POST', '/v2/items', {
        body: { sku: `HUGE-${column}`, [column]: '9'.repeat(140_000) },
      });
      expect(refused.status).toBe(422);
      expect(refused.body.errors).toEqual({
        [column]: [
          `must have at most ${column === 'price' ? 15 : 12} digits before the point and 4 after it`,
        ],
      });
      // The projector was not stopped (issue 23): a write of another organization is visible at once.
      const lastName = `After ${column}`;
      const started = Date.now();
      expect((await bystander.request('POST', '/v2/people', { body: { last_name: lastName } })).status).toBe(
        201,
      );
      expect(Date.now() - started).toBeLessThan(2_500);
      const found = await bystander.request(
        'GET',
        searchPath('people', { filters: [{ operand: 'last_name', operator: '=', value: lastName }] }),
      );
      expect(found.body.count).toBe(1);
    },
  );

  it.each([['/v2/people'], ['/v2/items'], ['/v2/orders'], ['/v2/webhooks']])(
    'answers a lone surrogate in a body to %s with a 400 naming the column, never a 500',
    async (path) => {
      const response = await acme.request('POST', path, { body: '{"last_name":"x\\ud800","sku":"S"}' });
      expect(response.status).toBe(400);
      expect(response.body.errors).toEqual({
        base: [
          'Request body text must be UTF-8: last_name holds a lone surrogate (\\ud800), which is no character',
        ],
      });
    },
  );

  it.each([
    ['=', '"x\\ud800"', 'q.filters[0].value'],
    ['in', '["a","x\\udc00"]', 'q.filters[0].value'],
  ])(
    'answers a lone surrogate in a search filter (%s) with a 400 naming it, never a search for U+FFFD',
    async (operator, value, column) => {
      // What the lone surrogate would silently become on its way to Postgres (UTF-8's replacement).
      expect((await acme.request('POST', '/v2/people', { body: { last_name: 'x\ufffd' } })).status).toBe(201);
      const q = `{"filters":[{"operand":"last_name","operator":"${operator}","value":${value}}]}`;
      const response = await acme.request('GET', `/v2/people?q=${encodeURIComponent(q)}`);
      expect(response.status).toBe(400);
      expect(response.body.errors).toEqual({
        [column]: [
          operator === 'in'
            ? '[1] holds a lone surrogate, which is no character'
            : 'holds a lone surrogate, which is no character',
        ],
      });
    },
  );

  it('refuses an order whose total would overflow, naming total', async () => {
    const refused = await acme.request('POST', '/v2/orders', {
      body: {
        order_number: 'SO-HUGE',
        lines: [{ sku: 'A', quantity: MAX_INT32, unit_price: '999999999999999.9999' }],
      },
    });
    expect(refused.status).toBe(422);
    expect(Object.keys(refused.body.errors!)).toEqual(['total']);
  });

  it('refuses an adjustment that would take on_hand beyond 32 bits, naming on_hand, and stock goes on', async () => {
    const adjust = (quantity_delta: number) =>
      acme.request('POST', '/v2/inventory_adjustments', {
        body: { sku: 'S', warehouse: 'W', quantity_delta },
      });
    expect((await adjust(MAX_INT32)).status).toBe(201);
    const refused = await adjust(1);
    expect(refused.status).toBe(422);
    expect(refused.body.errors).toEqual({
      on_hand: [
        'would be 2147483648 for sku "S" in warehouse "W", beyond what it holds (-2147483648 to 2147483647)',
      ],
    });
    expect((await adjust(-1)).status).toBe(201);
    expect(await stockOf(acme, 'S', 'W')).toEqual({
      on_hand: MAX_INT32 - 1,
      committed: 0,
      available: MAX_INT32 - 1,
      inbound: 0,
    });
  });

  it('refuses a fulfillment order that would commit more than 32 bits of a sku, naming committed', async () => {
    const line = { sku: 'C', quantity: MAX_INT32 };
    const first = await acme.request('POST', '/v2/fulfillment_orders', {
      body: { warehouse: 'W', lines: [line] },
    });
    expect(first.status).toBe(201);
    const refused = await acme.request('POST', '/v2/fulfillment_orders', {
      body: { warehouse: 'W', lines: [line] },
    });
    expect(refused.status).toBe(422);
    expect(Object.keys(refused.body.errors!)).toEqual(['committed']);
  });
});
