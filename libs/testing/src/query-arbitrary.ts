// Random valid `q` objects for property tests (fast-check), over the operands and columns a test
// chooses, with values from pools it gives so that filters match some records.
import fc from 'fast-check';

export interface QueryArbitraryOptions {
  /** Each operand (plain or dotted) with the values its filters draw from. */
  readonly operands: readonly (readonly [string, fc.Arbitrary<unknown>])[];
  readonly orderColumns: readonly string[];
  readonly maxLimit: number;
  readonly maxOffset: number;
}

/** Every operator of API.md §4: `=`/`!=` also with null, comparisons, and `in`/`not in` lists. */
export function queryArbitrary(options: QueryArbitraryOptions): fc.Arbitrary<Record<string, unknown>> {
  const filter = fc.constantFrom(...options.operands).chain(([operand, values]) =>
    fc.oneof(
      fc.record({
        operand: fc.constant(operand),
        operator: fc.constantFrom('=', '!='),
        value: fc.option(values),
      }),
      fc.record({
        operand: fc.constant(operand),
        operator: fc.constantFrom('>', '<', '>=', '<='),
        value: values,
      }),
      fc.record({
        operand: fc.constant(operand),
        operator: fc.constantFrom('in', 'not in'),
        value: fc.array(values, { maxLength: 4 }),
      }),
    ),
  );
  return fc.record(
    {
      limit: fc.integer({ min: 1, max: options.maxLimit }),
      offset: fc.integer({ min: 0, max: options.maxOffset }),
      order: fc.array(
        fc.record({
          column: fc.constantFrom(...options.orderColumns),
          direction: fc.constantFrom('asc', 'desc'),
        }),
        { maxLength: 3 },
      ),
      filters: fc.array(filter, { maxLength: 4 }),
    },
    { requiredKeys: ['filters'] },
  );
}
