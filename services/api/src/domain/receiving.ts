import { DomainError, fieldError, type RecordJson } from '@ofp/contracts';
import { listOf } from './record-rules.js';

// Receiving goods against a record's lines (API.md §6: purchase orders, returns): a PUT of
// `lines[].quantity_received`, which only grows, never past the line's `quantity`, and only while the
// record is ready to receive or partly received. The received quantities decide `partially_received`
// and `received`.

/** A line goods are received against. */
export interface ReceivingLine {
  readonly sku: string;
  readonly quantity: number;
  readonly quantity_received?: number | null;
}

/** The derived statuses every receiving record shares (starred in API.md §6). */
const PARTLY = 'partially_received';
const FULLY = 'received';

/** How a model receives. */
export interface Receiving<L extends ReceivingLine> {
  /** The status in which the record may start receiving, and which it has while nothing is received. */
  readonly ready: string;
  /** Line fields that cannot change once the line received something (its `sku`, a return's `disposition`). */
  readonly fixed: readonly (keyof L & string)[];
  /** A line as given, completed from the line at its index before the change (undefined on a new line). */
  readonly complete?: (line: L, previous: L | undefined) => L;
}

/** A change's lines with their received quantities, and the status those quantities decide. */
export interface Received<L extends ReceivingLine> {
  readonly lines: (L & { readonly quantity_received: number })[];
  readonly status: string;
}

/**
 * The lines after a change, each line left without `quantity_received` keeping its value, and the
 * record's status: in `ready`, `partially_received` or `received`, what the quantities decide; any
 * other status is kept.
 * @throws DomainError 422 on the line's path for a shrinking or excess quantity, a fixed field changed
 *   or a received line removed; 409 on `status` for receiving in any other status.
 */
export function receive<L extends ReceivingLine>(
  how: Receiving<L>,
  before: RecordJson | undefined,
  after: RecordJson,
): Received<L> {
  const previous = listOf<L>(before, 'lines');
  const lines = listOf<L>(after, 'lines').map((given, index) => {
    const earlier = previous[index];
    const line = how.complete ? how.complete(given, earlier) : given;
    const already = earlier?.quantity_received ?? 0;
    const received = line.quantity_received ?? already;
    const at = `lines[${index}]`;
    if (received < already)
      throw fieldError('Unprocessable', `${at}.quantity_received`, `cannot decrease: ${already} received`);
    if (received > line.quantity)
      throw fieldError(
        'Unprocessable',
        `${at}.quantity_received`,
        `must be at most the quantity ${line.quantity}`,
      );
    for (const name of how.fixed)
      if (received > 0 && earlier && earlier[name] !== line[name])
        throw fieldError('Unprocessable', `${at}.${name}`, 'cannot change once received');
    return { ...line, quantity_received: received };
  });
  previous.slice(lines.length).forEach((line, offset) => {
    if ((line.quantity_received ?? 0) > 0)
      throw fieldError(
        'Unprocessable',
        'lines',
        `line ${lines.length + offset} was received and cannot be removed`,
      );
  });
  const receiving = [how.ready, PARTLY, FULLY];
  const receivedNow = totalReceived(lines);
  const status = String(after.status);
  if (receivedNow > totalReceived(previous) && !receiving.includes(status))
    throw new DomainError('Conflict', { status: [`cannot receive while ${status}`] });
  const expected = lines.reduce((sum, line) => sum + line.quantity, 0);
  return {
    lines,
    status: !receiving.includes(status)
      ? status
      : receivedNow === 0
        ? how.ready
        : receivedNow === expected
          ? FULLY
          : PARTLY,
  };
}

/** Whether a change received goods: a line's `quantity_received` grew. */
export function receives(before: RecordJson | undefined, after: RecordJson): boolean {
  return totalReceived(listOf(after, 'lines')) > totalReceived(listOf(before, 'lines'));
}

/** Whether a change edited the lines other than in their received quantities. */
export function linesEdited(before: RecordJson | undefined, after: RecordJson): boolean {
  const strip = (lines: ReceivingLine[]) => lines.map(({ quantity_received: _, ...rest }) => rest);
  return JSON.stringify(strip(listOf(before, 'lines'))) !== JSON.stringify(strip(listOf(after, 'lines')));
}

function totalReceived(lines: readonly ReceivingLine[]): number {
  return lines.reduce((sum, line) => sum + (line.quantity_received ?? 0), 0);
}
