import { etagOf, noneMatchHits, recordIdOf } from './record-http.js';

describe('noneMatchHits', () => {
  const etag = etagOf(3);

  it.each([
    ['W/"3"', true],
    ['"3"', true],
    ['W/"2", W/"3"', true],
    ['*', true],
    ['W/"4"', false],
    ['W/"33"', false],
  ])('%s: %s', (header, hits) => {
    expect(noneMatchHits(header, etag)).toBe(hits);
  });

  it('is false without the header', () => {
    expect(noneMatchHits(undefined, etag)).toBe(false);
  });
});

describe('recordIdOf', () => {
  it.each(['1', '42', '9007199254740991'])('reads %s', (segment) => {
    expect(recordIdOf(segment, 'person')).toBe(Number(segment));
  });

  it.each(['0', '01', '-1', '1.5', '9007199254740992', '9223372036854775807', '1e3', 'x', ''])(
    'finds no record at %s (404)',
    (segment) => {
      expect(() => recordIdOf(segment, 'person')).toThrow(`person ${segment} not found`);
    },
  );
});
