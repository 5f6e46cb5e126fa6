import { randomUUID } from 'node:crypto';
import {
  createIntegrator,
  RUN_MODES,
  searchPath,
  startTestPlatform,
  type Integrator,
  type RunningPlatform,
} from '@ofp/testing';

interface Phone {
  number: string;
  phone_number_type: { id: number; name: string };
}
interface Person {
  id: number;
  first_name: string | null;
  last_name: string;
  email: string | null;
  company: string | null;
  phone_numbers: Phone[];
  version: number;
}

const FIRST = ['Ada', 'Grace', 'Alan', 'Edsger', 'Barbara', 'Donald', null];
const LAST = ['Lovelace', 'Hopper', 'Turing', 'Dijkstra', 'Liskov', 'Knuth'];
const COMPANIES = ['Acme', 'Globex', 'Initech', null];
const TYPES = ['Work', 'Home', 'Mobile', 'Fax'];

/** A deterministic data set: 36 people with 0 to 2 phone numbers each. */
function dataset(): Record<string, unknown>[] {
  return Array.from({ length: 36 }, (_, i) => ({
    first_name: FIRST[i % FIRST.length],
    last_name: LAST[i % LAST.length],
    email: i % 5 === 0 ? null : `p${i}@example.com`,
    company: COMPANIES[i % COMPANIES.length],
    external_id: `person-${i}`,
    phone_numbers: Array.from({ length: i % 3 }, (_, k) => ({
      number: `555${String(i).padStart(3, '0')}${k}`,
      phone_number_type: { name: TYPES[(i + k) % TYPES.length] },
    })),
  }));
}

const byBytes = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

describe.each(RUN_MODES)('people over HTTP ($mode)', ({ mode }) => {
  let platform: RunningPlatform;
  let acme: Integrator;
  let other: Integrator;
  let people: Person[];

  beforeAll(async () => {
    platform = await startTestPlatform(mode);
    [acme, other] = await Promise.all([
      createIntegrator(platform, { name: 'Acme' }),
      createIntegrator(platform, { name: 'Other' }),
    ]);
    people = [];
    for (const body of dataset()) {
      const created = await acme.request<Person>('POST', '/v2/people', { body });
      expect(created.status).toBe(201);
      people.push(created.body.results);
    }
    // The other organization has a look-alike person, which Acme must never see.
    expect(
      (
        await other.request('POST', '/v2/people', {
          body: {
            last_name: 'Lovelace',
            phone_numbers: [{ number: '5550001', phone_number_type: { name: 'Work' } }],
          },
        })
      ).status,
    ).toBe(201);
  }, 180_000);
  afterAll(async () => {
    await platform?.stop();
  }, 60_000);

  async function search(q: unknown): Promise<{ ids: number[]; total: number }> {
    const response = await acme.request<Person[]>('GET', searchPath('people', q));
    expect(response.status).toBe(200);
    return { ids: response.body.results.map((p) => p.id), total: response.body.total_results! };
  }

  it('answers a created person as the read model has it, with phone number types named', async () => {
    const first = people[1]!;
    const fetched = await acme.request<Person>('GET', `/v2/people/${first.id}`);
    expect(fetched.status).toBe(200);
    expect(fetched.headers.get('etag')).toBe('W/"1"');
    expect(fetched.body).toEqual({ count: 1, results: first, errors: null });
    expect(first.phone_numbers).toEqual([
      { number: '5550010', phone_number_type: { id: expect.any(Number), name: 'Home' } },
    ]);
  });

  it.each([
    ['=', 'last_name', 'Turing', (p: Person) => p.last_name === 'Turing'],
    ['!=', 'company', 'Acme', (p: Person) => p.company !== null && p.company !== 'Acme'],
    ['>', 'last_name', 'Knuth', (p: Person) => byBytes(p.last_name, 'Knuth') > 0],
    [
      '<',
      'first_name',
      'Barbara',
      (p: Person) => p.first_name !== null && byBytes(p.first_name, 'Barbara') < 0,
    ],
    ['>=', 'id', 0, () => true],
    ['<=', 'last_name', 'Hopper', (p: Person) => byBytes(p.last_name, 'Hopper') <= 0],
    ['in', 'first_name', ['Ada', 'Alan'], (p: Person) => p.first_name === 'Ada' || p.first_name === 'Alan'],
    [
      'not in',
      'company',
      ['Acme', 'Globex'],
      (p: Person) => p.company !== null && !['Acme', 'Globex'].includes(p.company),
    ],
    ['=', 'email', null, (p: Person) => p.email === null],
    ['!=', 'first_name', null, (p: Person) => p.first_name !== null],
  ])('filters with %s on %s', async (operator, operand, value, predicate) => {
    const expected = people.filter(predicate).map((p) => p.id);
    const result = await search({ filters: [{ operand, operator, value }], limit: 500 });
    expect(result.ids).toEqual(expected);
    expect(result.total).toBe(expected.length);
  });

  it('orders by two columns with precedence, id breaking ties, nulls last ascending', async () => {
    const expected = [...people]
      .sort((a, b) => {
        if (a.company !== b.company) {
          if (a.company === null) return 1;
          if (b.company === null) return -1;
          return byBytes(a.company, b.company);
        }
        return byBytes(b.last_name, a.last_name) || a.id - b.id;
      })
      .map((p) => p.id);
    const result = await search({
      order: [{ column: 'company' }, { column: 'last_name', direction: 'desc' }],
      limit: 500,
    });
    expect(result.ids).toEqual(expected);
  });

  it('pages with limit and offset, total ignoring both', async () => {
    const all = people.map((p) => p.id);
    const page = await search({ limit: 10, offset: 20 });
    expect(page.ids).toEqual(all.slice(20, 30));
    expect(page.total).toBe(all.length);
    const past = await search({ limit: 10, offset: 1000 });
    expect(past).toEqual({ ids: [], total: all.length });
  });

  it('filters through phone_numbers.phone_number_type.name', async () => {
    const expected = people
      .filter((p) => p.phone_numbers.some((n) => n.phone_number_type.name === 'Fax'))
      .map((p) => p.id);
    expect(
      (
        await search({
          filters: [{ operand: 'phone_numbers.phone_number_type.name', operator: '=', value: 'Fax' }],
          limit: 500,
        })
      ).ids,
    ).toEqual(expected);
  });

  it('tests two dotted filters on the same relation against the same phone number', async () => {
    const target = people.find((p) => p.phone_numbers.length === 2)!;
    const [home, other] = target.phone_numbers;
    const same = await search({
      filters: [
        {
          operand: 'phone_numbers.phone_number_type.name',
          operator: '=',
          value: home!.phone_number_type.name,
        },
        { operand: 'phone_numbers.number', operator: '=', value: home!.number },
      ],
    });
    expect(same.ids).toEqual([target.id]);
    // The type of one number and the digits of the other: no single phone number has both.
    const crossed = await search({
      filters: [
        {
          operand: 'phone_numbers.phone_number_type.name',
          operator: '=',
          value: other!.phone_number_type.name,
        },
        { operand: 'phone_numbers.number', operator: '=', value: home!.number },
      ],
    });
    expect(crossed.ids).toEqual([]);
  });

  it('never shows another organization’s records', async () => {
    const otherPeople = await other.request<Person[]>('GET', searchPath('people', { limit: 500 }));
    expect(otherPeople.body.results).toHaveLength(1);
    const foreignId = otherPeople.body.results[0]!.id;
    expect((await acme.request('GET', `/v2/people/${foreignId}`)).status).toBe(404);
    expect(
      (await acme.request('PUT', `/v2/people/${foreignId}`, { body: { first_name: 'Mallory' } })).status,
    ).toBe(404);
    expect((await acme.request('DELETE', `/v2/people/${foreignId}`)).status).toBe(404);
    const dotted = await search({
      filters: [{ operand: 'phone_numbers.number', operator: '=', value: '5550001' }],
    });
    expect(dotted.ids).toEqual([]);
  });

  it('updates the fields given, replaces a nested list, and honours If-Match and its lists', async () => {
    const person = people[4]!;
    const stale = await acme.request('PUT', `/v2/people/${person.id}`, {
      body: { company: 'Stale' },
      headers: { 'if-match': 'W/"7"' },
    });
    expect(stale.status).toBe(412);
    const updated = await acme.request<Person>('PATCH', `/v2/people/${person.id}`, {
      body: {
        company: 'Umbrella',
        phone_numbers: [{ number: '5559999', phone_number_type: { name: 'Mobile' } }],
      },
      headers: { 'if-match': 'W/"1"' },
    });
    expect(updated.status).toBe(200);
    expect(updated.headers.get('etag')).toBe('W/"2"');
    expect(updated.body.results).toMatchObject({
      first_name: person.first_name,
      last_name: person.last_name,
      company: 'Umbrella',
      version: 2,
    });
    expect(updated.body.results.phone_numbers).toEqual([
      { number: '5559999', phone_number_type: { id: expect.any(Number), name: 'Mobile' } },
    ]);
    // Read-your-writes: the search already sees the change.
    expect(
      (await search({ filters: [{ operand: 'company', operator: '=', value: 'Umbrella' }] })).ids,
    ).toEqual([person.id]);
    // If-Match is a list (RFC 9110 §13.1.1): the write applies when one of its tags is current.
    const listed = await acme.request<Person>('PUT', `/v2/people/${person.id}`, {
      body: { email: 'listed@example.com' },
      headers: { 'if-match': 'W/"1", "not-ours", W/"2"' },
    });
    expect(listed.status).toBe(200);
    expect(listed.headers.get('etag')).toBe('W/"3"');
    const staleList = await acme.request('DELETE', `/v2/people/${person.id}`, {
      headers: { 'if-match': 'W/"1", W/"2"' },
    });
    expect(staleList.status).toBe(412);
  });

  it('deletes and answers the deleted record, then 404', async () => {
    const person = people[5]!;
    const deleted = await acme.request<Person>('DELETE', `/v2/people/${person.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body.results).toMatchObject({ id: person.id, version: 2 });
    expect((await acme.request('GET', `/v2/people/${person.id}`)).status).toBe(404);
    expect((await search({ filters: [{ operand: 'id', operator: '=', value: person.id }] })).total).toBe(0);
  });

  it('reports validation errors by nested column path', async () => {
    const response = await acme.request('POST', '/v2/people', {
      body: { first_name: 'X', phone_numbers: [{ number: '12', phone_number_type: { name: 'Work' } }] },
    });
    expect(response.status).toBe(422);
    expect(response.body.errors).toHaveProperty('last_name');
    expect(response.body.errors).toHaveProperty(['phone_numbers[0].number']);
    const unknownType = await acme.request('POST', '/v2/people', {
      body: { last_name: 'X', phone_numbers: [{ number: '1234', phone_number_type: { name: 'Pager' } }] },
    });
    expect(unknownType.status).toBe(422);
    expect(unknownType.body.errors).toHaveProperty(['phone_numbers[0].phone_number_type']);
  });

  it('refuses a duplicate external_id with 409 and a taken id with 409', async () => {
    const duplicate = await acme.request('POST', '/v2/people', {
      body: { last_name: 'Dup', external_id: 'person-0' },
    });
    expect(duplicate.status).toBe(409);
    expect(duplicate.body.errors).toHaveProperty('external_id');
    const taken = await acme.request('POST', `/v2/people/${people[0]!.id}`, { body: { last_name: 'Taken' } });
    expect(taken.status).toBe(409);
    const foreignTaken = await other.request('POST', `/v2/people/${people[0]!.id}`, {
      body: { last_name: 'Taken' },
    });
    expect(foreignTaken.status).toBe(409);
    expect(foreignTaken.body.errors).toEqual({ id: ['has already been taken'] });
  });

  it('gives a created person a server-assigned id that a create at a chosen id did not take', async () => {
    const first = await acme.request<Person>('POST', '/v2/people', { body: { last_name: 'Before' } });
    expect(first.status).toBe(201);
    const chosen = first.body.results.id + 1;
    const taken = await acme.request<Person>('POST', `/v2/people/${chosen}`, {
      body: { last_name: 'Chosen' },
    });
    expect(taken.status).toBe(201);
    const next = await acme.request<Person>('POST', '/v2/people', { body: { last_name: 'After' } });
    expect(next.status).toBe(201);
    expect(next.body.results.id).toBeGreaterThan(chosen);
    const read = await acme.request<Person>('GET', `/v2/people/${chosen}`);
    expect(read.body.results.last_name).toBe('Chosen');
  });

  it('replays an Idempotency-Key and refuses the key with another body', async () => {
    const key = randomUUID();
    const first = await acme.request<Person>('POST', '/v2/people', {
      body: { last_name: 'Once' },
      headers: { 'idempotency-key': key },
    });
    const again = await acme.request<Person>('POST', '/v2/people', {
      body: { last_name: 'Once' },
      headers: { 'idempotency-key': key },
    });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    const changed = await acme.request('POST', '/v2/people', {
      body: { last_name: 'Twice' },
      headers: { 'idempotency-key': key },
    });
    expect(changed.status).toBe(422);
  });

  it('makes a write once however many requests with its key race, and keeps nothing of a failed one', async () => {
    const key = randomUUID();
    const racing = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        acme.request<Person>('POST', i % 2 === 0 ? '/v2/people' : '/api/v2/people/', {
          body: { last_name: `Raced ${key}` },
          headers: { 'idempotency-key': key },
        }),
      ),
    );
    expect(racing.map((response) => response.status)).toEqual(Array(6).fill(201));
    expect(new Set(racing.map((response) => response.text)).size).toBe(1);
    expect(racing.filter((response) => response.headers.get('idempotent-replayed') === 'true')).toHaveLength(
      5,
    );
    const found = await acme.request(
      'GET',
      searchPath('people', { filters: [{ operand: 'last_name', operator: '=', value: `Raced ${key}` }] }),
    );
    expect(found.body.total_results).toBe(1);
    const { id, version } = racing[0]!.body.results;

    // Changes pinned to one version with one key: one change, and each answer is its answer (no 412).
    const pinned = await Promise.all(
      Array.from({ length: 4 }, () =>
        acme.request<Person>('PUT', `/v2/people/${id}`, {
          body: { first_name: 'Pinned' },
          headers: { 'idempotency-key': `${key}-pinned`, 'if-match': `W/"${version}"` },
        }),
      ),
    );
    expect(pinned.map((response) => response.status)).toEqual(Array(4).fill(200));
    expect(new Set(pinned.map((response) => response.text)).size).toBe(1);
    expect(pinned[0]!.body.results.version).toBe(version + 1);

    // A create at a taken id fails in its transaction and keeps nothing: the key serves another request.
    const failed = randomUUID();
    const taken = await acme.request('POST', `/v2/people/${id}`, {
      body: { last_name: 'Taken' },
      headers: { 'idempotency-key': failed },
    });
    expect(taken.status).toBe(409);
    const next = await acme.request('POST', '/v2/people', {
      body: { last_name: 'Taken' },
      headers: { 'idempotency-key': failed },
    });
    expect(next.status).toBe(201);
    expect(next.headers.get('idempotent-replayed')).toBeNull();
  });

  it('serves reads behind the same gate as writes, with HEAD and conditional GET', async () => {
    const path = `/v2/people/${people[0]!.id}`;
    const read = await acme.request<Person>('GET', path, { headers: { 'x-request-id': 'read-1' } });
    expect(read.status).toBe(200);
    expect(read.headers.get('x-request-id')).toBe('read-1');
    expect(read.headers.get('ratelimit-limit')).toMatch(/^\d+$/);
    const etag = read.headers.get('etag');
    expect(etag).toBe(`W/"${read.body.results.version}"`);
    const unchanged = await acme.request('GET', path, { headers: { 'if-none-match': etag! } });
    expect(unchanged.status).toBe(304);
    expect(unchanged.headers.get('etag')).toBe(etag);
    expect((await acme.request('GET', path, { headers: { 'if-none-match': 'W/"999"' } })).status).toBe(200);

    const head = await acme.request('HEAD', '/api/v2/people/');
    expect(head.status).toBe(200);
    expect(head.headers.get('content-type')).toBe('application/json; charset=utf-8');
    expect(head.body).toBeNull();
    const twice = encodeURIComponent('{}');
    expect((await acme.request('GET', `/v2/people?q=${twice}&q=${twice}`)).body.errors).toEqual({
      base: ['q must be given once'],
    });
    expect((await acme.request('GET', '/v2/people/abc')).status).toBe(404);

    const anonymous = await fetch(`${platform.apiUrl}${path}`);
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get('www-authenticate')).toBe('Bearer');
    const writer = await createIntegrator(platform, { name: 'Writer', scopes: ['write'] });
    const refused = await writer.request('GET', '/v2/people');
    expect(refused.status).toBe(403);
    expect(refused.headers.get('www-authenticate')).toContain('insufficient_scope');
  });

  it('answers protocol errors in the envelope', async () => {
    expect(
      (
        await acme.request('POST', '/v2/people', {
          body: 'last_name=x',
          headers: { 'content-type': 'text/plain' },
        })
      ).status,
    ).toBe(415);
    const malformed = await acme.request('POST', '/v2/people', {
      body: '{"last_name":',
      headers: { 'content-type': 'application/json' },
    });
    expect(malformed.status).toBe(400);
    expect(malformed.body).toEqual({ count: 0, results: null, errors: { base: [expect.any(String)] } });
    const wrongMethod = await acme.request('PATCH', '/v2/people');
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('GET, POST');
    expect((await acme.request('GET', '/v2/starships')).status).toBe(404);
    const badQ = await acme.request(
      'GET',
      searchPath('people', { filters: [{ operand: 'last_name', operator: '~', value: 'x' }] }),
    );
    expect(badQ.status).toBe(400);
    expect(badQ.body.errors).toHaveProperty(['q.filters[0].operator']);
    expect((await acme.request('GET', '/api/v2/people/' + people[0]!.id)).status).toBe(200);
  });

  it('shows no type for a phone number whose type was deleted, as for none (the document schema)', async () => {
    const type = await acme.request<{ id: number }>('POST', '/v2/phone_number_types', {
      body: { name: 'Pager' },
    });
    expect(type.status).toBe(201);
    const created = await acme.request<Person>('POST', '/v2/people', {
      body: {
        last_name: 'Shannon',
        phone_numbers: [{ number: '5550777', phone_number_type: { name: 'Pager' } }],
      },
    });
    expect(created.status).toBe(201);
    expect(created.body.results.phone_numbers).toEqual([
      { number: '5550777', phone_number_type: { id: type.body.results.id, name: 'Pager' } },
    ]);
    expect((await acme.request('DELETE', `/v2/phone_number_types/${type.body.results.id}`)).status).toBe(200);
    const fetched = await acme.request<Person>('GET', `/v2/people/${created.body.results.id}`);
    expect(fetched.body.results.phone_numbers).toEqual([{ number: '5550777', phone_number_type: null }]);
    const found = await search({ filters: [{ operand: 'last_name', operator: '=', value: 'Shannon' }] });
    expect(found.ids).toEqual([created.body.results.id]);
  });
});
