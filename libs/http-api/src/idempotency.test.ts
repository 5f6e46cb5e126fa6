import { requestHash } from './idempotency.js';

describe('the request hash of an Idempotency-Key (API.md §5)', () => {
  it('is the same for the same JSON, whatever the order of its members', () => {
    const hash = (body: string) => requestHash('POST', '/v2/people', JSON.parse(body)).value;
    expect(hash('{"a": 1, "b": {"c": [1, 2], "d": null}}')).toBe(hash('{"b":{"d":null,"c":[1,2]},"a":1}'));
    expect(hash('{"a": [1, 2]}')).not.toBe(hash('{"a": [2, 1]}'));
    expect(requestHash('PUT', '/v2/people', { a: 1 }).value).not.toBe(hash('{"a": 1}'));
  });

  // The chaos run's hostile writer: a currency of 400 nines answered 500 with canonicalize's throw.
  it('hashes the bodies RFC 8785 has no form for, which the platform then refuses, without failing', () => {
    for (const body of [`{"currency": ${'9'.repeat(400)}}`, '{"last_name": "\\ud800"}']) {
      const parsed: unknown = JSON.parse(body);
      const hash = requestHash('POST', '/v2/people', parsed);
      expect(hash.value).toMatch(/^[0-9a-f]{64}$/);
      expect(hash.value).toBe(requestHash('POST', '/v2/people', JSON.parse(body)).value);
    }
  });
});
