import { etagOf, noneMatchHits } from './record-http.js';

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
