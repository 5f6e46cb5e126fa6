import { canonicalDecimal, canonicalTimestamp, isDate, isTimestamp, utcTimestamp } from './formats.js';

describe('isDate', () => {
  it.each(['2026-11-21', '2024-02-29', '0001-01-01', '0099-12-31'])('accepts %s', (value) => {
    expect(isDate(value)).toBe(true);
  });

  it.each(['2026-02-29', '2026-13-01', '2026-00-10', '2026-1-5', '0000-01-01', '2026-11-21T00:00:00Z', ''])(
    'refuses %s',
    (value) => {
      expect(isDate(value)).toBe(false);
    },
  );
});

describe('isTimestamp', () => {
  it.each([
    '2026-11-21T07:30:00.000Z',
    '2026-11-21t07:30:00z',
    '2026-11-21T08:30:00+01:00',
    '2026-11-21T07:30:00.123456789Z',
    // RFC 3339 offsets go up to 23:59, beyond the ±15:59 that Postgres reads.
    '1725-06-29T13:10:06+22:33',
  ])('accepts %s', (value) => {
    expect(isTimestamp(value)).toBe(true);
  });

  it.each([
    '2026-11-21T07:30:00',
    '2026-11-21 07:30:00Z',
    '2026-11-21T24:00:00Z',
    '2026-11-21T23:59:60Z',
    '2026-02-30T00:00:00Z',
    '2026-11-21T07:30:00+0100',
    '2026-11-21T07:30Z',
    // Year 0 and year 10000 in UTC.
    '0001-01-01T00:00:00+22:33',
    '9999-12-31T23:00:00-05:00',
  ])('refuses %s', (value) => {
    expect(isTimestamp(value)).toBe(false);
  });
});

describe('canonicalTimestamp', () => {
  it('writes UTC with milliseconds', () => {
    expect(canonicalTimestamp('2026-11-21t08:30:00+01:00')).toBe('2026-11-21T07:30:00.000Z');
  });
});

describe('utcTimestamp', () => {
  it('moves the instant to UTC and keeps every digit of the fraction', () => {
    expect(utcTimestamp('1725-06-29T13:10:06.123456+22:33')).toBe('1725-06-28T14:37:06.123456Z');
    expect(utcTimestamp('2026-11-21t08:30:00z')).toBe('2026-11-21T08:30:00Z');
  });
});

describe('canonicalDecimal', () => {
  it.each<[string | number, number, string]>([
    ['12.5', 2, '12.50'],
    [12, 2, '12.00'],
    ['007.10', 2, '7.10'],
    ['-0.00', 2, '0.00'],
    ['-3', 0, '-3'],
    [0.1, 3, '0.100'],
    ['123456789012345678.99', 2, '123456789012345678.99'],
  ])('writes %p with scale %i as %s', (value, scale, expected) => {
    expect(canonicalDecimal(value, scale)).toBe(expected);
  });

  it.each<[string | number, number]>([
    ['12.345', 2],
    ['1e3', 2],
    [1e21, 2],
    [Number.NaN, 2],
    ['12.', 2],
    ['.5', 2],
    ['+1', 2],
    [' 1', 2],
    ['', 2],
  ])('refuses %p with scale %i', (value, scale) => {
    expect(canonicalDecimal(value, scale)).toBeUndefined();
  });
});
