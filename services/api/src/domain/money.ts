// Money arithmetic on the API's decimal strings (API.md §1: `"12.50"`), in integer hundredths so that
// no binary floating point rounding creeps into totals and balances.

/** Hundredths of a currency unit. */
export type Cents = bigint;

/** `"12.50"` → 1250n; anything but a decimal string (an unpriced line's null) counts as zero. */
export function toCents(value: unknown): Cents {
  if (typeof value !== 'string') return 0n;
  const text = value;
  const negative = text.startsWith('-');
  const [whole = '0', fraction = ''] = text.replace('-', '').split('.');
  const cents = BigInt(whole) * 100n + BigInt(fraction.padEnd(2, '0').slice(0, 2));
  return negative ? -cents : cents;
}

/** 1250n → `"12.50"`. */
export function fromCents(cents: Cents): string {
  const negative = cents < 0n;
  const magnitude = negative ? -cents : cents;
  const fraction = String(magnitude % 100n).padStart(2, '0');
  return `${negative ? '-' : ''}${magnitude / 100n}.${fraction}`;
}

/** The sum of `quantity × price` over lines, as a decimal string (`total` of orders, purchase orders, invoices). */
export function lineTotal(lines: readonly { quantity: number; price: unknown }[]): string {
  return fromCents(lines.reduce((sum, line) => sum + BigInt(line.quantity) * toCents(line.price), 0n));
}
