import fc from 'fast-check';
import { parseQuery, people, phoneNumberTypes } from '@ofp/models';
import {
  createIntegrator,
  oracleSearch,
  queryArbitrary,
  searchPath,
  type Integrator,
  type RunningPlatform,
  startTestPlatform,
} from '@ofp/testing';

// Random searches over HTTP (issue 3): valid `q` answered exactly as the in-memory reading of API.md §4
// over the records the api itself returned; invalid `q` always a 400 envelope naming `q`, never a 5xx.

type Person = Record<string, unknown> & { id: number };

const FIRST = ['Ada', 'ada', 'Alan', 'Zoe', 'Émile', ''];
const LAST = ['Lovelace', 'lovelace', 'Turing', 'Zuse', 'Ørsted'];
const COMPANIES = ['Acme', 'acme', 'Zeta'];
const NUMBERS = ['5550', '5551', '5552', '1234'];
const TYPES = ['Work', 'Home', 'Mobile', 'Fax'];

const personArbitrary = fc.record({
  first_name: fc.option(fc.constantFrom(...FIRST)),
  last_name: fc.constantFrom(...LAST),
  company: fc.option(fc.constantFrom(...COMPANIES)),
  email: fc.option(fc.constantFrom('a@example.com', 'B@example.com')),
  phone_numbers: fc.array(
    fc.record({
      number: fc.constantFrom(...NUMBERS),
      phone_number_type: fc.record({ name: fc.constantFrom(...TYPES) }),
    }),
    { maxLength: 3 },
  ),
});

const OPERANDS: [string, fc.Arbitrary<unknown>][] = [
  ['first_name', fc.constantFrom(...FIRST, 'B')],
  ['last_name', fc.constantFrom(...LAST, 'M')],
  ['company', fc.constantFrom(...COMPANIES)],
  ['email', fc.constantFrom('a@example.com', 'B@example.com')],
  ['id', fc.integer({ min: 0, max: 200 })],
  ['version', fc.integer({ min: 0, max: 3 })],
  ['phone_numbers.number', fc.constantFrom(...NUMBERS)],
  ['phone_numbers.phone_number_type.name', fc.constantFrom(...TYPES)],
];

const validQ = queryArbitrary({
  operands: OPERANDS,
  orderColumns: ['first_name', 'last_name', 'company', 'email', 'id'],
  maxLimit: 40,
  maxOffset: 50,
});

/** A valid query broken in one of the ways API.md §4 forbids. */
const invalidQ: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('not json', '[]', '42', '"q"', 'null', '{"limit":', '{"filters":{}}'),
  validQ
    .chain((q) =>
      fc.constantFrom<Record<string, unknown>>(
        { ...q, unknown: true },
        { ...q, limit: 0 },
        { ...q, limit: 501 },
        { ...q, limit: null },
        { ...q, limit: '5' },
        { ...q, limit: 1.5 },
        { ...q, offset: -1 },
        { ...q, order: { column: 'id' } },
        { ...q, order: Array.from({ length: 6 }, () => ({ column: 'id' })) },
        { ...q, order: [{ column: 'id', direction: 'up' }] },
        { ...q, order: [{ column: 'phone_numbers.number' }] },
        { ...q, order: [{ column: 'shoe_size' }] },
        { ...q, filters: [{ operand: 'last_name', operator: '=' }] },
        { ...q, filters: [{ operand: 'last_name', operator: '~', value: 'x' }] },
        { ...q, filters: [{ operand: 'shoe_size', operator: '=', value: 1 }] },
        { ...q, filters: [{ operand: 'phone_numbers', operator: '=', value: 'x' }] },
        { ...q, filters: [{ operand: 'id', operator: '=', value: 'one' }] },
        { ...q, filters: [{ operand: 'last_name', operator: '=', value: 3 }] },
        { ...q, filters: [{ operand: 'last_name', operator: '>', value: null }] },
        { ...q, filters: [{ operand: 'last_name', operator: 'in', value: 'x' }] },
        {
          ...q,
          filters: [{ operand: 'id', operator: 'in', value: Array.from({ length: 1001 }, (_, i) => i) }],
        },
        { ...q, filters: [{ operand: 'last_name', operator: '=', value: 'x', extra: 1 }] },
        { ...q, filters: Array.from({ length: 21 }, () => ({ operand: 'id', operator: '>', value: 0 })) },
        { ...q, filters: [{ operand: 'a.b.c.d.e', operator: '=', value: 'x' }] },
      ),
    )
    .map((q) => JSON.stringify(q)),
);

describe('random searches over HTTP', () => {
  let platform: RunningPlatform;
  let acme: Integrator;
  const records: Person[] = [];
  let types: Person[];

  beforeAll(async () => {
    platform = await startTestPlatform('standalone');
    acme = await createIntegrator(platform, { name: 'Acme' });
    const decoy = await createIntegrator(platform, { name: 'Decoy' });
    for (const body of fc.sample(personArbitrary, { seed: 20261121, numRuns: 60 })) {
      const created = await acme.request<Person>('POST', '/v2/people', { body });
      expect(created.status).toBe(201);
      records.push(created.body.results);
    }
    for (const body of fc.sample(personArbitrary, { seed: 7, numRuns: 10 }))
      await decoy.request('POST', '/v2/people', { body });
    types = (await acme.request<Person[]>('GET', '/v2/phone_number_types')).body.results;
  }, 180_000);
  afterAll(async () => {
    await platform?.stop();
  }, 60_000);

  it('answers random valid q like the in-memory reading of the q language', async () => {
    const world = (model: string) =>
      model === people.name ? records : model === phoneNumberTypes.name ? types : [];
    const byId = new Map(records.map((r) => [r.id, r]));
    await fc.assert(
      fc.asyncProperty(validQ, async (q) => {
        const expected = oracleSearch(people, world, parseQuery(people, JSON.stringify(q)));
        const response = await acme.request<Person[]>('GET', searchPath('people', q));
        expect(response.status).toBe(200);
        expect(response.body.total_results).toBe(expected.total);
        expect(response.body.results).toEqual(expected.ids.map((id) => byId.get(id)));
      }),
      { numRuns: 150, seed: 42 },
    );
  }, 120_000);

  it('answers every invalid q with a 400 envelope naming q', async () => {
    await fc.assert(
      fc.asyncProperty(invalidQ, async (q) => {
        const response = await acme.request('GET', `/v2/people?q=${encodeURIComponent(q)}`);
        expect(response.status).toBe(400);
        expect(response.body.count).toBe(0);
        expect(response.body.results).toBeNull();
        expect(
          Object.keys(response.body.errors ?? {}).every((key) => key === 'q' || key.startsWith('q.')),
        ).toBe(true);
      }),
      { numRuns: 200, seed: 43 },
    );
  }, 120_000);

  it('never answers arbitrary JSON as q with a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(fc.jsonValue({ maxDepth: 4 }), async (value) => {
        const response = await acme.request(
          'GET',
          `/v2/people?q=${encodeURIComponent(JSON.stringify(value))}`,
        );
        expect([200, 400]).toContain(response.status);
      }),
      { numRuns: 200, seed: 44 },
    );
  }, 120_000);

  it('refuses a q over 8 KiB and accepts one just under it', async () => {
    const filler = (bytes: number) => ({
      filters: [{ operand: 'last_name', operator: '=', value: 'x'.repeat(bytes) }],
    });
    const base = JSON.stringify(filler(0)).length;
    const over = await acme.request('GET', searchPath('people', filler(8 * 1024 - base + 1)));
    expect(over.status).toBe(400);
    expect(over.body.errors).toHaveProperty('q');
    const under = await acme.request('GET', searchPath('people', filler(8 * 1024 - base)));
    expect(under.status).toBe(200);
    // Quotes are two bytes in JSON and six once URI-escaped: a request line of over 20 KiB still gets through.
    const escaped = {
      filters: [
        { operand: 'last_name', operator: '=', value: '"'.repeat(Math.floor((8 * 1024 - base) / 2)) },
      ],
    };
    const path = searchPath('people', escaped);
    expect(path.length).toBeGreaterThan(20 * 1024);
    expect((await acme.request('GET', path)).status).toBe(200);
  });
});
