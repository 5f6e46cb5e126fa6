import { decimalText, decimalUnits, MONEY } from '@ofp/models';

// Money arithmetic on the API's decimal strings (API.md §1: `"12.50"`), in whole ten-thousandths (the
// smallest unit money holds) as bigints, so that no binary floating point rounding creeps into totals
// and balances, and no total is too large to add up exactly (the decider then refuses one beyond
// what its column holds).

/** Ten-thousandths of a currency unit. */
export type MoneyUnits = bigint;

/** `"12.50"` → 125000n; anything but a decimal string (an unpriced line's null) counts as zero. */
export function toUnits(value: unknown): MoneyUnits {
  return typeof value === 'string' ? decimalUnits(value, MONEY.scale) : 0n;
}

/** 125000n → `"12.50"`, 121250n → `"12.125"`. */
export function fromUnits(units: MoneyUnits): string {
  return decimalText(units, MONEY);
}

/** The sum of `quantity × price` over lines, as a decimal string (`total` of orders, purchase orders, invoices). */
export function lineTotal(lines: readonly { quantity: number; price: unknown }[]): string {
  return fromUnits(lines.reduce((sum, line) => sum + BigInt(line.quantity) * toUnits(line.price), 0n));
}
