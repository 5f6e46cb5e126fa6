import fc from 'fast-check';
import {
  createTestDatabase,
  oracleSearch,
  queryArbitrary as queryArbitraryOf,
  type TestDatabase,
} from '@ofp/testing';
import { readModelDdl } from './ddl.js';
import { writeRecord } from './projection.js';
import { parseQuery } from './query.js';
import { people, phoneNumberTypes } from './registry.js';
import { searchRecords } from './search.js';
import type { RecordDocument } from './projection.js';

// Random valid `q` over random people, compared with the in-memory reading of API.md §4. Values come
// from small pools so that filters match some records, ties and nulls are common, and strings differ
// in case and in bytes beyond ASCII (C collation).

const ORG = 1;
const OTHER_ORG = 2;
const TIMESTAMPS = [
  '2026-01-01T00:00:00.000Z',
  '2026-06-30T12:00:00.000Z',
  '2026-06-30T12:00:00.001Z',
  '2027-01-01T00:00:00.000Z',
];
const FIRST_NAMES = ['Ada', 'ada', 'Alan', 'Zoe', 'zoe', 'Émile', 'Ömer', ''];
const LAST_NAMES = ['Lovelace', 'lovelace', 'Turing', 'Zuse', 'Ørsted'];
const NUMBERS = ['555', '5551', '5552', '1234', '99999'];
const TYPE_NAMES = ['Work', 'Home', 'Mobile', 'Fax'];

const typesOf = (firstId: number) =>
  TYPE_NAMES.map((name, index) => ({
    id: firstId + index,
    name,
    external_id: null,
    created_at: TIMESTAMPS[0]!,
    updated_at: TIMESTAMPS[0]!,
    version: 1,
  }));
const orgTypes = typesOf(1);
const otherTypes = typesOf(11);

function peopleArbitrary(types: typeof orgTypes, count: number) {
  const phone = fc.record({
    number: fc.constantFrom(...NUMBERS),
    phone_number_type: fc.option(fc.constantFrom(...types.map(({ id, name }) => ({ id, name })))),
  });
  const person = fc.record({
    first_name: fc.option(fc.constantFrom(...FIRST_NAMES)),
    last_name: fc.constantFrom(...LAST_NAMES),
    email: fc.option(fc.constantFrom('a@example.com', 'b@example.com', 'B@example.com')),
    company: fc.option(fc.constantFrom('Acme', 'acme', 'Zeta')),
    phone_numbers: fc.array(phone, { maxLength: 3 }),
    external_id: fc.option(fc.constantFrom('x-1', 'x-2', 'x-10')),
    created_at: fc.constantFrom(...TIMESTAMPS),
    updated_at: fc.constantFrom(...TIMESTAMPS),
    version: fc.integer({ min: 1, max: 4 }),
  });
  return fc.array(person, { minLength: count, maxLength: count });
}

const value = {
  string: (pool: readonly string[]) => fc.oneof(fc.constantFrom(...pool), fc.string({ maxLength: 3 })),
  id: fc.integer({ min: 0, max: 130 }),
  version: fc.integer({ min: 0, max: 5 }),
  timestamp: fc.oneof(fc.constantFrom(...TIMESTAMPS), fc.constant('2026-06-30T13:00:00+01:00')),
};

const OPERANDS: [string, fc.Arbitrary<unknown>][] = [
  ['first_name', value.string(FIRST_NAMES)],
  ['last_name', value.string(LAST_NAMES)],
  ['email', value.string(['a@example.com', 'B@example.com'])],
  ['company', value.string(['Acme', 'acme', 'Zeta'])],
  ['external_id', value.string(['x-1', 'x-10'])],
  ['id', value.id],
  ['version', value.version],
  ['created_at', value.timestamp],
  ['phone_numbers.number', value.string(NUMBERS)],
  ['phone_numbers.phone_number_type.name', value.string(TYPE_NAMES)],
  ['phone_numbers.phone_number_type.id', fc.integer({ min: 0, max: 15 })],
];
const ORDER_COLUMNS = [
  'first_name',
  'last_name',
  'email',
  'company',
  'external_id',
  'id',
  'version',
  'created_at',
  'updated_at',
];

const queryArbitrary = queryArbitraryOf({
  operands: OPERANDS,
  orderColumns: ORDER_COLUMNS,
  maxLimit: 30,
  maxOffset: 130,
});

describe('random searches agree with the in-memory reading of the q language', () => {
  let db: TestDatabase;
  let orgPeople: RecordDocument[];

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.pool.query(readModelDdl([phoneNumberTypes, people]));
    const [generated] = fc.sample(peopleArbitrary(orgTypes, 120), { seed: 20261121, numRuns: 1 });
    const [others] = fc.sample(peopleArbitrary(otherTypes, 40), { seed: 7, numRuns: 1 });
    orgPeople = generated!.map((person, index) => ({ id: index + 1, ...person }));
    const otherPeople = others!.map((person, index) => ({ id: 1001 + index, ...person }));
    for (const type of orgTypes) await writeRecord(db.pool, phoneNumberTypes, ORG, type);
    for (const type of otherTypes) await writeRecord(db.pool, phoneNumberTypes, OTHER_ORG, type);
    for (const person of orgPeople) await writeRecord(db.pool, people, ORG, person);
    for (const person of otherPeople) await writeRecord(db.pool, people, OTHER_ORG, person);
  });

  afterAll(async () => {
    await db.drop();
  });

  it('for every query: the same total, the same page, records rendered as written', async () => {
    const world = (name: string) =>
      name === people.name ? orgPeople : name === phoneNumberTypes.name ? orgTypes : [];
    const byId = new Map(orgPeople.map((person) => [person.id as number, person]));
    await fc.assert(
      fc.asyncProperty(queryArbitrary, async (q) => {
        const query = parseQuery(people, JSON.stringify(q));
        const expected = oracleSearch(people, world, query);
        const actual = await searchRecords(db.pool, people, ORG, query);
        expect(actual.total_results).toBe(expected.total);
        expect(actual.results).toEqual(expected.ids.map((id) => byId.get(id)));
      }),
      { numRuns: 400, seed: 42 },
    );
  });
});
