// Value formats shared by body validation and `q` value checks (API.md §1).

/**
 * JavaScript's whitespace and line terminators (what `\s` and `trim()` mean in ECMAScript), written
 * out for a regular expression's character class, for the patterns the OpenAPI document publishes:
 * a Python `\s` (what schemathesis reads them with) leaves out the BOM and takes `\x1c`-`\x1f` and
 * `\x85`, so a pattern with `\s` means different strings to each. Written out, it means these alone.
 */
export const WHITESPACE =
  '\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff';

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;

/** A real calendar date written `YYYY-MM-DD`, year 1 or later (Postgres has no year 0). */
export function isDate(value: string): boolean {
  const match = DATE.exec(value);
  if (!match) return false;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const date = new Date(Date.UTC(year, month - 1, day));
  // Date.UTC maps years 0..99 onto 1900..1999; setUTCFullYear does not.
  date.setUTCFullYear(year);
  return year >= 1 && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

const TIMESTAMP = /^(\d{4}-\d{2}-\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-](\d{2}):(\d{2}))$/;

/**
 * An RFC 3339 date-time with a time zone (`2026-11-21T07:30:00.000Z`, `2026-11-21T08:30:00+01:00`),
 * at an instant between the years 1 and 9999 in UTC (an offset can carry a year-1 time into year 0,
 * which Postgres has not).
 */
export function isTimestamp(value: string): boolean {
  const match = TIMESTAMP.exec(value);
  if (!match || !isDate(match[1]!)) return false;
  const [hours, minutes, seconds] = [Number(match[2]), Number(match[3]), Number(match[4])];
  const [offsetHours, offsetMinutes] = [Number(match[7] ?? 0), Number(match[8] ?? 0)];
  // Leap seconds (:60) are refused: Postgres would silently roll them over into the next minute.
  if (!(hours < 24 && minutes < 60 && seconds < 60 && offsetHours < 24 && offsetMinutes < 60)) return false;
  const year = new Date(value.toUpperCase()).getUTCFullYear();
  return year >= 1 && year <= 9999;
}

/**
 * The same instant in UTC, its fraction of a second kept to the digit: how `q` hands a timestamp to
 * Postgres, which refuses offsets beyond ±15:59 that RFC 3339 allows (up to ±23:59).
 */
export function utcTimestamp(value: string): string {
  const match = TIMESTAMP.exec(value)!;
  const whole = new Date(`${match[1]}T${match[2]}:${match[3]}:${match[4]}${match[6]!.toUpperCase()}`);
  return `${whole.toISOString().slice(0, 19)}${match[5] ?? ''}Z`;
}

/** The canonical form the API answers with: UTC, milliseconds (`2026-11-21T07:30:00.000Z`). */
export function canonicalTimestamp(value: string): string {
  return new Date(value.toUpperCase()).toISOString();
}

const DECIMAL = /^(-?)(\d+)(?:\.(\d+))?$/;

/** The digits a decimal column holds and writes (see `DecimalColumn`). */
export interface DecimalFormat {
  readonly integerDigits: number;
  readonly scale: number;
  readonly minScale: number;
}

/**
 * A decimal written as a string (`"12.5"`) or a JSON number, in canonical form: leading zeros and the
 * zeros after the point beyond `minScale` dropped, padded to `minScale` (`"12.50"`, `"12.125"`).
 * `{problem}` when it is not a plain decimal, or has more digits than the format holds (zeros that
 * change nothing aside): a value is never rounded. Works on the text, so no binary floating point
 * rounding creeps in.
 */
export function canonicalDecimal(
  value: string | number,
  format: DecimalFormat,
): { readonly value: string } | { readonly problem: string } {
  const text = typeof value === 'number' ? (Number.isFinite(value) ? String(value) : '') : value;
  const match = DECIMAL.exec(text);
  if (!match) return { problem: 'must be a decimal string such as "12.50"' };
  const [, sign, whole, fraction = ''] = match;
  const digits = whole!.replace(/^0+(?=\d)/, '');
  const significant = fraction.replace(/0+$/, '');
  if (digits.length > format.integerDigits || significant.length > format.scale)
    return { problem: digitsProblem(format) };
  const written = significant.padEnd(format.minScale, '0');
  const negative = sign === '-' && /[1-9]/.test(digits + significant);
  return { value: `${negative ? '-' : ''}${digits}${written === '' ? '' : `.${written}`}` };
}

/** What a value beyond a decimal format is told. */
export function digitsProblem(format: DecimalFormat): string {
  return `must have at most ${format.integerDigits} digits before the point and ${format.scale} after it`;
}

/** A canonical decimal as a whole number of its format's smallest units (`"12.50"`, scale 4 → 125000n). */
export function decimalUnits(text: string, scale: number): bigint {
  const negative = text.startsWith('-');
  const [whole = '0', fraction = ''] = (negative ? text.slice(1) : text).split('.');
  const units =
    BigInt(whole) * 10n ** BigInt(scale) + BigInt(fraction.padEnd(scale, '0').slice(0, scale) || '0');
  return negative ? -units : units;
}

/** Smallest units back to the canonical decimal of a format (125000n → `"12.50"` for money). */
export function decimalText(units: bigint, format: DecimalFormat): string {
  const negative = units < 0n;
  const magnitude = negative ? -units : units;
  const unit = 10n ** BigInt(format.scale);
  const fraction = String(magnitude % unit)
    .padStart(format.scale, '0')
    .replace(/0+$/, '')
    .padEnd(format.minScale, '0');
  return `${negative ? '-' : ''}${magnitude / unit}${fraction === '' ? '' : `.${fraction}`}`;
}

/** Whether a number of smallest units has no more digits before the point than the format holds. */
export function fitsDecimal(units: bigint, format: DecimalFormat): boolean {
  const limit = 10n ** BigInt(format.integerDigits + format.scale);
  return units < limit && units > -limit;
}
