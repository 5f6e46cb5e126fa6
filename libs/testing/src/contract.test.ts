import { loadContract, type Contract } from './contract.js';

describe('the contract checks of the end-to-end tests', () => {
  let contract: Contract;
  beforeAll(async () => {
    contract = await loadContract();
  });

  const person = {
    id: 7,
    first_name: null,
    last_name: 'Hopper',
    email: null,
    company: null,
    phone_numbers: [],
    external_id: null,
    created_at: '2026-11-21T07:30:00.000Z',
    updated_at: '2026-11-21T07:30:00.000Z',
    version: 1,
  };
  const delivery = {
    id: '0b8e5f8e-3f4a-4e8e-9c57-2f1d4b1e6a01',
    type: 'person.created',
    timestamp: '2026-11-21T07:30:00.000Z',
    sequence: 1,
    data: person,
    previous_attributes: {},
  };

  it("accepts a delivery body as the document's webhooks entry describes it", () => {
    expect(contract.deliveryProblems(JSON.stringify(delivery))).toEqual([]);
  });

  it('refuses a delivery body that leaves a field out, adds one, or has an unknown type', () => {
    const { last_name: _left, ...withoutLastName } = person;
    expect(contract.deliveryProblems(JSON.stringify({ ...delivery, data: withoutLastName }))).toEqual([
      expect.stringContaining("must have required property 'last_name'"),
    ]);
    expect(contract.deliveryProblems(JSON.stringify({ ...delivery, surprise: true }))).toEqual([
      expect.stringContaining('must NOT have additional properties'),
    ]);
    expect(contract.deliveryProblems(JSON.stringify({ ...delivery, type: 'people.created' }))).toEqual([
      "the event type people.created is not in the document's webhooks",
    ]);
  });

  it('checks a response by its operation: documented status, media type and schema', () => {
    const page = { count: 1, total_results: 1, offset: 0, results: [person], errors: null };
    const response = (status: number, body: unknown, contentType = 'application/json; charset=utf-8') => ({
      method: 'GET',
      path: '/v2/people',
      status,
      contentType,
      body: JSON.stringify(body),
    });
    expect(contract.responseProblems(response(200, page))).toEqual([]);
    expect(
      contract.responseProblems(response(200, { ...page, results: [{ ...person, version: '1' }] })),
    ).toEqual([expect.stringContaining('/results/0/version must be integer')]);
    expect(contract.responseProblems(response(200, page, 'text/html'))).toEqual([
      'the content type text/html is not one of application/json',
    ]);
    expect(contract.responseProblems(response(404, page))).toEqual([
      '404 is not a documented response of GET /v2/people',
    ]);
  });
});
