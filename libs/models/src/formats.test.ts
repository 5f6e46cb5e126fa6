import { MONEY, WEIGHT } from './fields.js';
import {
  canonicalDecimal,
  canonicalTimestamp,
  decimalText,
  decimalUnits,
  fitsDecimal,
  isDate,
  isTimestamp,
  utcTimestamp,
  type DecimalFormat,
} from './formats.js';

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
  it.each<[string | number, DecimalFormat, string]>([
    ['12.5', MONEY, '12.50'],
    [12, MONEY, '12.00'],
    ['007.10', MONEY, '7.10'],
    ['-0.00', MONEY, '0.00'],
    ['12.125', MONEY, '12.125'],
    ['12.1250', MONEY, '12.125'],
    ['0.0001', MONEY, '0.0001'],
    ['12.50000', MONEY, '12.50'],
    ['999999999999999.9999', MONEY, '999999999999999.9999'],
    ['-999999999999999.9999', MONEY, '-999999999999999.9999'],
    ['0000000000000000001', MONEY, '1.00'],
    [0.1, WEIGHT, '0.100'],
    ['1.2345', WEIGHT, '1.2345'],
    ['-3', { integerDigits: 3, scale: 0, minScale: 0 }, '-3'],
  ])('writes %p as %s', (value, format, expected) => {
    expect(canonicalDecimal(value, format)).toEqual({ value: expected });
  });

  it.each<[string | number, DecimalFormat]>([
    ['12.12345', MONEY],
    ['1000000000000000', MONEY],
    ['1000000000000', WEIGHT],
    ['1e3', MONEY],
    [1e21, MONEY],
    [1e15, MONEY],
    [Number.NaN, MONEY],
    ['NaN', MONEY],
    ['Infinity', MONEY],
    ['12.', MONEY],
    ['.5', MONEY],
    ['+1', MONEY],
    [' 1', MONEY],
    ['', MONEY],
    ['1'.repeat(140_000), MONEY],
  ])('refuses %p', (value, format) => {
    expect(canonicalDecimal(value, format)).toHaveProperty('problem');
  });
});

describe('decimal units', () => {
  it.each<[string, DecimalFormat, bigint]>([
    ['12.50', MONEY, 125000n],
    ['-0.0001', MONEY, -1n],
    ['1.500', WEIGHT, 15000n],
  ])('reads %s as %p units and writes them back', (text, format, units) => {
    expect(decimalUnits(text, format.scale)).toBe(units);
    expect(decimalText(units, format)).toBe(text);
  });

  it('tells whether units fit the digits of a format', () => {
    expect(fitsDecimal(9999999999999999999n, MONEY)).toBe(true);
    expect(fitsDecimal(10000000000000000000n, MONEY)).toBe(false);
    expect(fitsDecimal(-10000000000000000000n, MONEY)).toBe(false);
  });
});
