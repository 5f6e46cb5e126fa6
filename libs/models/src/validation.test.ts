import { execFileSync } from 'node:child_process';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { z } from 'zod';
import { DomainError } from '@ofp/contracts';
import {
  inventoryAdjustments,
  invoices,
  items,
  orders,
  people,
  phoneNumberTypes,
  purchaseOrders,
  shipments,
} from './registry.js';
import { columnPath, requestBodySchema, validateCreate, validateUpdate } from './validation.js';
import type { ModelDefinition } from './fields.js';

/** The errors a validation threw, or a failure when it did not throw a 422. */
function errorsOf(validation: () => unknown): Record<string, string[]> {
  try {
    validation();
  } catch (error) {
    expect(error).toBeInstanceOf(DomainError);
    expect((error as DomainError).kind).toBe('Unprocessable');
    return (error as DomainError).errors;
  }
  throw new Error('expected a validation error');
}

const createErrors = (model: ModelDefinition, body: unknown) => errorsOf(() => validateCreate(model, body));
const updateErrors = (model: ModelDefinition, body: unknown) => errorsOf(() => validateUpdate(model, body));

describe('validateCreate', () => {
  it('accepts a person and fills in an empty phone number list', () => {
    expect(validateCreate(people, { last_name: 'Lovelace' })).toEqual({
      last_name: 'Lovelace',
      phone_numbers: [],
    });
  });

  it('requires the required fields', () => {
    expect(createErrors(people, { first_name: 'Ada' })).toEqual({ last_name: ['is required'] });
  });

  it('refuses a blank required string', () => {
    expect(createErrors(people, { last_name: '  ' })).toEqual({ last_name: ["can't be blank"] });
  });

  it('names a nested column by its path', () => {
    const body = {
      last_name: 'L',
      phone_numbers: [{ number: '12-34', phone_number_type: { name: 'Work' } }],
    };
    expect(createErrors(people, body)).toEqual({ 'phone_numbers[0].number': ['must be 3 to 20 digits'] });
  });

  it('reports every invalid column at once', () => {
    const body = { email: 'nope', phone_numbers: [{ number: '5551234' }, { phone_number_type: { id: 0 } }] };
    expect(createErrors(people, body)).toEqual({
      last_name: ['is required'],
      email: ['must be an email address'],
      'phone_numbers[1].number': ['is required'],
      'phone_numbers[1].phone_number_type.id': ['must be at least 1'],
    });
  });

  it('ignores unknown and read-only fields', () => {
    const body = {
      last_name: 'L',
      id: 9,
      version: 3,
      created_at: 'x',
      updated_at: 'y',
      favourite_colour: 'red',
    };
    expect(validateCreate(people, body)).toEqual({ last_name: 'L', phone_numbers: [] });
  });

  it('ignores unknown fields inside nested elements', () => {
    const body = { last_name: 'L', phone_numbers: [{ number: '5551234', extension: '12' }] };
    expect(validateCreate(people, body)).toEqual({ last_name: 'L', phone_numbers: [{ number: '5551234' }] });
  });

  it('accepts a phone number type named by id or by name', () => {
    const body = {
      last_name: 'L',
      phone_numbers: [
        { number: '5551234', phone_number_type: { id: 2 } },
        { number: '5551235', phone_number_type: { name: 'Work' } },
      ],
    };
    expect(validateCreate(people, body)).toEqual(body);
  });

  it('refuses a phone number type named by neither id nor name', () => {
    const body = { last_name: 'L', phone_numbers: [{ number: '5551234', phone_number_type: {} }] };
    expect(createErrors(people, body)).toEqual({
      'phone_numbers[0].phone_number_type': ['must name the phone_number_type by id or name'],
    });
  });

  it('refuses a phone number type given as a bare string', () => {
    const body = { last_name: 'L', phone_numbers: [{ number: '5551234', phone_number_type: 'Work' }] };
    expect(Object.keys(createErrors(people, body))).toEqual(['phone_numbers[0].phone_number_type']);
  });

  it('accepts an optional external_id and refuses one that is not a string', () => {
    expect(validateCreate(people, { last_name: 'L', external_id: 'crm-1' })).toMatchObject({
      external_id: 'crm-1',
    });
    expect(createErrors(people, { last_name: 'L', external_id: 12 })).toEqual({
      external_id: ['must be a string'],
    });
  });

  it('refuses a body that is not an object', () => {
    expect(createErrors(people, [{ last_name: 'L' }])).toEqual({ base: ['must be a JSON object'] });
  });

  it('refuses strings that Postgres cannot store', () => {
    expect(createErrors(people, { last_name: 'a\u0000b' })).toEqual({
      last_name: ['must not contain NUL characters'],
    });
  });

  it('refuses strings over the maximum length', () => {
    expect(createErrors(phoneNumberTypes, { name: 'x'.repeat(101) })).toEqual({
      name: ['must be at most 100 characters'],
    });
  });

  it('normalizes decimals to their scale and fills in defaults', () => {
    expect(validateCreate(items, { sku: 'A-1', price: '12.5', weight: 2 })).toEqual({
      sku: 'A-1',
      price: '12.50',
      weight: '2.000',
      active: true,
    });
  });

  it('refuses decimals with too many digits after the point, and non-decimals', () => {
    expect(createErrors(items, { sku: 'A-1', price: '12.34567', weight: 'heavy' })).toEqual({
      price: ['must have at most 15 digits before the point and 4 after it'],
      weight: ['must be a decimal string such as "12.50"'],
    });
  });

  it('keeps up to 4 digits after the point, writing money with at least 2 and weights with at least 3', () => {
    expect(validateCreate(items, { sku: 'A-1', price: '12.1250', weight: '0.0001' })).toMatchObject({
      price: '12.125',
      weight: '0.0001',
    });
    expect(validateCreate(items, { sku: 'A-1', price: '999999999999999.9999' })).toMatchObject({
      price: '999999999999999.9999',
    });
  });

  it('refuses decimals beyond their digits, whatever their form', () => {
    for (const price of ['1000000000000000', '1'.repeat(140_000), '1e3', 'NaN', 'Infinity', 1e15, 1e300])
      expect(createErrors(items, { sku: 'A-1', price })).toHaveProperty('price');
    expect(createErrors(items, { sku: 'A-1', weight: '1000000000000' })).toEqual({
      weight: ['must have at most 12 digits before the point and 4 after it'],
    });
  });

  it('refuses quantities beyond 32 bits and ids beyond 2^53 - 1', () => {
    expect(createErrors(inventoryAdjustments, { sku: 'A', quantity_delta: 2 ** 31 })).toEqual({
      quantity_delta: ['must be at most 2147483647'],
    });
    expect(createErrors(inventoryAdjustments, { sku: 'A', quantity_delta: -(2 ** 31) - 1 })).toEqual({
      quantity_delta: ['must be at least -2147483648'],
    });
    expect(createErrors(orders, { order_number: 'SO-1', customer_id: 2 ** 53 })).toEqual({
      customer_id: ['must be at most 9007199254740991'],
    });
    // As a JSON number, 2^63 - 1 reaches JavaScript rounded; it is refused all the same.
    expect(
      createErrors(orders, JSON.parse('{"order_number":"SO-1","customer_id":9223372036854775807}')),
    ).toEqual({
      customer_id: ['must be at most 9007199254740991'],
    });
  });

  it('counts characters as code points, as JSON Schema and varchar do', () => {
    expect(validateCreate(phoneNumberTypes, { name: '😀'.repeat(100) })).toEqual({ name: '😀'.repeat(100) });
    expect(createErrors(phoneNumberTypes, { name: '😀'.repeat(101) })).toEqual({
      name: ['must be at most 100 characters'],
    });
  });

  it('refuses values outside an enumeration and malformed codes', () => {
    expect(createErrors(items, { sku: 'A-1', weight_unit: 'stone', currency: 'usd', price: '-1' })).toEqual({
      weight_unit: ['must be one of: g, kg, oz, lb'],
      currency: ['must be an ISO 4217 currency code such as USD'],
      price: ['must be at least 0'],
    });
  });

  it('refuses null for a column that is not nullable', () => {
    expect(createErrors(items, { sku: 'A-1', active: null })).toEqual({ active: ["can't be null"] });
  });

  it('names columns of embedded objects and lines by path', () => {
    const body = {
      order_number: 'SO-1',
      ship_to: { country: 'us' },
      lines: [{ sku: 'A', quantity: 1 }, {}, { sku: 'B', quantity: 0 }],
    };
    expect(createErrors(orders, body)).toEqual({
      'ship_to.country': ['must be an ISO 3166-1 alpha-2 code'],
      'lines[1].sku': ['is required'],
      'lines[1].quantity': ['is required'],
      'lines[2].quantity': ['must be at least 1'],
    });
  });

  it('names columns of lists inside lists by path', () => {
    const body = {
      fulfillment_order_id: 1,
      packages: [
        {
          lines: [
            { sku: 'A', quantity: 1 },
            { sku: 'B', quantity: 1.5 },
          ],
        },
      ],
    };
    expect(createErrors(shipments, body)).toEqual({
      'packages[0].lines[1].quantity': ['must be an integer'],
    });
  });

  it('normalizes timestamps to UTC milliseconds and checks dates', () => {
    expect(
      validateCreate(shipments, { fulfillment_order_id: 1, shipped_at: '2026-11-21T08:30:00+01:00' }),
    ).toMatchObject({ shipped_at: '2026-11-21T07:30:00.000Z' });
    expect(createErrors(invoices, { invoice_number: 'I-1', issue_date: '2026-02-30' })).toEqual({
      issue_date: ['must be a date (YYYY-MM-DD)'],
    });
  });

  it('ignores derived fields, in lines too', () => {
    const body = {
      invoice_number: 'I-1',
      total: '99.00',
      lines: [{ quantity: 1, unit_price: '2', amount: '5.00' }],
    };
    expect(validateCreate(invoices, body)).toEqual({
      invoice_number: 'I-1',
      amount_paid: '0.00',
      lines: [{ quantity: 1, unit_price: '2.00' }],
    });
  });
});

describe('validateUpdate', () => {
  it('accepts an empty update and keeps left-out fields out', () => {
    expect(validateUpdate(people, {})).toEqual({});
  });

  it('lets an optional field be cleared but not a required one', () => {
    expect(validateUpdate(people, { email: null })).toEqual({ email: null });
    expect(updateErrors(people, { last_name: null })).toEqual({ last_name: ["can't be null"] });
  });

  it('validates a nested list given in full, since it replaces the old one', () => {
    expect(
      updateErrors(people, { phone_numbers: [{ number: '5551234' }, { phone_number_type: { id: 1 } }] }),
    ).toEqual({
      'phone_numbers[1].number': ['is required'],
    });
  });

  it('does not fill in defaults', () => {
    expect(validateUpdate(items, { name: 'Widget' })).toEqual({ name: 'Widget' });
  });
});

describe('columnPath', () => {
  it('writes list indexes in brackets and object keys after dots', () => {
    expect(columnPath(['packages', 0, 'lines', 2, 'quantity'])).toBe('packages[0].lines[2].quantity');
  });
});

describe('the JSON Schema of request bodies says what the validator refuses (what schemathesis checks)', () => {
  const property = (model: ModelDefinition, name: string): { pattern?: string; enum?: string[] } => {
    const schema = z.toJSONSchema(requestBodySchema(model, 'create'), {
      io: 'input',
      unrepresentable: 'any',
    }) as {
      properties: Record<
        string,
        { pattern?: string; enum?: string[]; anyOf?: { pattern?: string; enum?: string[] }[] }
      >;
    };
    const found = schema.properties[name]!;
    return found.anyOf?.[0] ?? found;
  };
  const accepted = (model: ModelDefinition, body: Record<string, unknown>, column: string): boolean => {
    try {
      validateCreate(model, body);
      return true;
    } catch (error) {
      return (error as DomainError).errors[column] === undefined;
    }
  };
  // With what JavaScript's \s and Python's differ on: the BOM (JavaScript's alone), \x1c-\x1f and \x85
  // (Python's alone).
  const strings = [
    'Lovelace',
    ' Ada ',
    '',
    ' ',
    '\t\n',
    '\ufeff',
    '\u00a0',
    'A\u0000',
    '\u0000',
    '\u00a0x',
    '\x1c',
    '\x1f',
    '\x85',
    '\x85\ufeff\x1d',
  ];

  it('a required string: its pattern matches exactly what is neither blank nor holding a NUL', () => {
    const pattern = new RegExp(property(people, 'last_name').pattern!);
    for (const value of strings)
      expect([value, pattern.test(value)]).toEqual([
        value,
        accepted(people, { last_name: value }, 'last_name'),
      ]);
  });

  it('an optional string: its pattern matches exactly what holds no NUL', () => {
    const pattern = new RegExp(property(people, 'first_name').pattern!);
    for (const value of strings)
      expect([value, pattern.test(value)]).toEqual([
        value,
        accepted(people, { last_name: 'Lovelace', first_name: value }, 'first_name'),
      ]);
  });

  it("the published patterns match the same strings in Python's regular expressions (schemathesis's) as in JavaScript's", () => {
    const emails = ['ada@example.com', 'ada\x85@example.com', 'ada@\ufeffexample.com', 'ada\x1c@x.io'];
    const cases = [
      ...strings.map((value) => ({ pattern: property(people, 'last_name').pattern!, value })),
      ...strings.map((value) => ({ pattern: property(people, 'first_name').pattern!, value })),
      ...emails.map((value) => ({ pattern: property(people, 'email').pattern!, value })),
    ];
    const python = JSON.parse(
      execFileSync(
        'python3',
        [
          '-c',
          'import json, re, sys\nprint(json.dumps([re.search(c["pattern"], c["value"]) is not None for c in json.load(sys.stdin)]))',
        ],
        { input: JSON.stringify(cases) },
      ).toString(),
    ) as boolean[];
    const javascript = cases.map(({ pattern, value }) => new RegExp(pattern, 'u').test(value));
    expect(cases.map((each, i) => ({ ...each, python: python[i] }))).toEqual(
      cases.map((each, i) => ({ ...each, python: javascript[i] })),
    );
    // Agreeing, both refuse only the BOM, which is JavaScript's whitespace (and the validator's).
    expect(emails.map((email) => accepted(people, { last_name: 'Lovelace', email }, 'email'))).toEqual([
      true,
      true,
      false,
      true,
    ]);
  });

  /** Whether the document's schema of a create body and the validator agree on each body. */
  const agreement = (model: ModelDefinition, bodies: Record<string, unknown>[]) => {
    const schema = z.toJSONSchema(requestBodySchema(model, 'create'), {
      io: 'input',
      unrepresentable: 'any',
    });
    const valid = new Ajv2020({ strict: false }).compile(schema);
    return bodies.map((body) => {
      let validator = true;
      try {
        validateCreate(model, body);
      } catch (error) {
        if (!(error instanceof DomainError)) throw error;
        validator = false;
      }
      return { body, document: valid(body), validator };
    });
  };
  const agreeing = (rows: { body: unknown; document: boolean; validator: boolean }[]) =>
    rows.map(({ body, validator }) => ({ body, document: validator, validator }));

  it('a reference: the document asks for one of its lookup keys, as the validator does', () => {
    const rows = agreement(
      people,
      [{}, { id: 1 }, { name: 'Work' }, { id: 1, name: 'Work' }, { label: 'Work' }, null].map(
        (phone_number_type) => ({
          last_name: 'Lovelace',
          phone_numbers: [{ number: '4155550123', phone_number_type }],
        }),
      ),
    );
    expect(rows).toEqual(agreeing(rows));
    expect(rows.map(({ validator }) => validator)).toEqual([false, true, true, true, false, true]);
  });

  it('an email: its pattern refuses what the validator refuses, a NUL included', () => {
    const rows = agreement(
      people,
      [
        'ada@example.com',
        'ada\u0000@example.com',
        'ada@exam\u0000ple.com',
        'ada example.com',
        'a@b@c',
        '@x',
      ].map((email) => ({ last_name: 'Lovelace', email })),
    );
    expect(rows).toEqual(agreeing(rows));
    expect(rows.filter(({ validator }) => validator)).toHaveLength(1);
  });

  it('a status lists the states a client may ask for, not those the system derives (API.md §6)', () => {
    for (const model of [orders, purchaseOrders, invoices]) {
      const machine = model.stateMachine!;
      const column = model.fields[machine.column] as unknown as { values: string[] };
      expect(property(model, machine.column).enum).toEqual(
        column.values.filter((value) => !machine.derived.includes(value)),
      );
      expect(machine.derived.length).toBeGreaterThan(0);
    }
  });
});
