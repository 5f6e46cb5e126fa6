import { DomainError, fieldError } from '@ofp/contracts';
import { invoices } from '@ofp/models';
import { fromUnits, toUnits } from './money.js';
import { listOf, movedTo, plainRules, type RecordRules } from './record-rules.js';

interface InvoiceLine {
  readonly quantity: number;
  readonly unit_price: string;
}

/** The statuses the amount paid decides (API.md §6); a void invoice keeps its status. */
const PAYMENT_STATUSES = ['open', 'partially_paid', 'paid'];

/**
 * Invoices: each line's `amount` is `quantity × unit_price`, `total` their sum, `amount_due` what is
 * left to pay. Paying is a PUT of a larger `amount_paid` (it never shrinks, never passes `total`);
 * the status follows the amount paid, and paying in full is announced as `invoice.paid`.
 */
export const invoiceRules: RecordRules = {
  ...plainRules(invoices),
  settle: ({ before, after }) => {
    const lines = listOf<InvoiceLine>(after, 'lines').map((line) => ({
      ...line,
      amount: fromUnits(BigInt(line.quantity) * toUnits(line.unit_price)),
    }));
    const total = lines.reduce((sum, line) => sum + toUnits(line.amount), 0n);
    const paid = toUnits(after.amount_paid);
    const paidBefore = toUnits(before?.amount_paid);
    if (paid > paidBefore && after.status === 'void')
      throw new DomainError('Conflict', { status: ['cannot pay a void invoice'] });
    if (paid < paidBefore)
      throw fieldError('Unprocessable', 'amount_paid', `cannot decrease: ${fromUnits(paidBefore)} is paid`);
    if (paid > total)
      throw fieldError('Unprocessable', 'amount_paid', `must be at most the total ${fromUnits(total)}`);
    const status = PAYMENT_STATUSES.includes(String(after.status))
      ? paid === 0n
        ? 'open'
        : paid === total
          ? 'paid'
          : 'partially_paid'
      : after.status;
    return {
      record: {
        ...after,
        status,
        lines,
        total: fromUnits(total),
        amount_due: fromUnits(total - paid),
      },
    };
  },
  eventType: (before, after) => (movedTo(before, after, 'paid') ? 'invoice.paid' : undefined),
};
