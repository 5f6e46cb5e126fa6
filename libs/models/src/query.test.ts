import { DomainError } from '@ofp/contracts';
import { parseQuery, type SearchQuery } from './query.js';
import { fulfillmentOrders, inventory, items, orders, people, shipments } from './registry.js';
import type { ModelDefinition } from './fields.js';

/** The errors of a refused `q`, or a failure when it was accepted or refused otherwise than with a 400. */
function errorsOf(rawQ: string, model: ModelDefinition = people): Record<string, string[]> {
  try {
    parseQuery(model, rawQ);
  } catch (error) {
    expect(error).toBeInstanceOf(DomainError);
    expect((error as DomainError).kind).toBe('Invalid');
    return (error as DomainError).errors;
  }
  throw new Error(`expected ${rawQ} to be refused`);
}

const q = (value: unknown) => JSON.stringify(value);
const filter = (operand: string, operator: string, value: unknown) => ({ operand, operator, value });
/** The keys of the errors of a refused `q` with these filters. */
const filterErrorKeys = (...filters: unknown[]) => Object.keys(errorsOf(q({ filters })));

describe('parseQuery', () => {
  describe('accepts', () => {
    it('no q, with the defaults', () => {
      expect(parseQuery(people, undefined)).toEqual({ limit: 50, offset: 0, order: [], filters: [] });
    });

    it('an empty object, with the defaults', () => {
      expect(parseQuery(people, '{}')).toEqual({ limit: 50, offset: 0, order: [], filters: [] });
    });

    it('every key, resolving operands and defaulting the direction', () => {
      const parsed = parseQuery(
        people,
        q({
          limit: 500,
          offset: 10000,
          order: [{ column: 'last_name' }, { column: 'first_name', direction: 'desc' }],
          filters: [
            filter('last_name', '=', 'Smith'),
            filter('phone_numbers.phone_number_type.name', 'in', ['Work', 'Home']),
            filter('email', '!=', null),
          ],
        }),
      );
      expect(parsed).toEqual<SearchQuery>({
        limit: 500,
        offset: 10000,
        order: [
          { column: 'last_name', direction: 'asc' },
          { column: 'first_name', direction: 'desc' },
        ],
        filters: [
          { relations: [], column: 'last_name', type: 'string', operator: '=', value: 'Smith' },
          {
            relations: ['phone_numbers', 'phone_number_type'],
            column: 'name',
            type: 'string',
            operator: 'in',
            value: ['Work', 'Home'],
          },
          { relations: [], column: 'email', type: 'string', operator: '!=', value: null },
        ],
      });
    });

    it('values of each column type', () => {
      const parsed = parseQuery(
        items,
        q({
          filters: [
            filter('price', '>=', 12.5),
            filter('id', 'not in', [1, 2]),
            filter('active', '=', true),
            filter('created_at', '<', '2026-11-21t07:30:00.123456z'),
          ],
        }),
      );
      expect(parsed.filters.map((f) => f.value)).toEqual([12.5, [1, 2], true, '2026-11-21T07:30:00.123456Z']);
    });

    it('dates, through an embedded object and lines', () => {
      const parsed = parseQuery(
        orders,
        q({
          filters: [filter('requested_ship_date', '>', '2026-01-31'), filter('ship_to.country', '=', 'US')],
        }),
      );
      expect(parsed.filters.map((f) => f.relations)).toEqual([[], ['ship_to']]);
    });

    it('operands through joined relations to other models', () => {
      const parsed = parseQuery(
        fulfillmentOrders,
        q({ filters: [filter('shipments.packages.tracking_number', '=', '1Z')] }),
      );
      expect(parsed.filters[0]).toMatchObject({
        relations: ['shipments', 'packages'],
        column: 'tracking_number',
        type: 'string',
      });
      expect(parseQuery(inventory, q({ filters: [filter('item.price', '>', 1)] })).filters[0]).toMatchObject({
        relations: ['item'],
        type: 'decimal',
      });
    });

    it('the largest offset', () => {
      expect(parseQuery(people, q({ offset: Number.MAX_SAFE_INTEGER })).offset).toBe(Number.MAX_SAFE_INTEGER);
    });

    it('empty in and not in lists', () => {
      expect(parseQuery(people, q({ filters: [filter('id', 'in', [])] })).filters[0]).toMatchObject({
        value: [],
      });
    });

    it('exactly 8 KiB', () => {
      const padding = 8192 - q({ filters: [filter('last_name', '=', '')] }).length;
      const rawQ = q({ filters: [filter('last_name', '=', 'x'.repeat(padding))] });
      expect(Buffer.byteLength(rawQ)).toBe(8192);
      expect(parseQuery(people, rawQ).filters).toHaveLength(1);
    });
  });

  describe('refuses q as a whole', () => {
    it.each([
      ['not JSON', '{limit: 5}', 'must be valid JSON'],
      ['empty', '', 'must be valid JSON'],
      ['an array', '[]', 'must be a JSON object'],
      ['null', 'null', 'must be a JSON object'],
      ['a string', '"limit"', 'must be a JSON object'],
      ['an unknown key', q({ sort: [] }), 'unknown key "sort"'],
      ['a limit of 0', q({ limit: 0 }), 'limit must be an integer from 1 to 500'],
      ['a limit of 501', q({ limit: 501 }), 'limit must be an integer from 1 to 500'],
      ['a null limit', q({ limit: null }), 'limit must be an integer from 1 to 500'],
      ['a fractional limit', q({ limit: 2.5 }), 'limit must be an integer from 1 to 500'],
      ['a limit in a string', q({ limit: '5' }), 'limit must be an integer from 1 to 500'],
      ['a negative offset', q({ offset: -1 }), 'offset must be an integer from 0 to 9007199254740991'],
      ['a null offset', q({ offset: null }), 'offset must be an integer from 0 to 9007199254740991'],
      ['an unsafe offset', q({ offset: 2 ** 53 }), 'offset must be an integer from 0 to 9007199254740991'],
      ['a huge offset', q({ offset: 1e300 }), 'offset must be an integer from 0 to 9007199254740991'],
      [
        'an order that is not an array',
        q({ order: { column: 'id' } }),
        'order must be an array of {column, direction}',
      ],
      ['an order over 5', q({ order: Array(6).fill({ column: 'id' }) }), 'order may have at most 5 elements'],
      [
        'an order element that is not an object',
        q({ order: ['id'] }),
        'order[0] must be an object {column, direction}',
      ],
      [
        'an order element with an unknown key',
        q({ order: [{ column: 'id', nulls: 'first' }] }),
        'order[0] has unknown key "nulls"',
      ],
      [
        'an order element without column',
        q({ order: [{ direction: 'asc' }] }),
        'order[0].column is required',
      ],
      [
        'a bad direction',
        q({ order: [{ column: 'id', direction: 'ASC' }] }),
        'order[0].direction must be "asc" or "desc"',
      ],
      [
        'a null direction',
        q({ order: [{ column: 'id', direction: null }] }),
        'order[0].direction must be "asc" or "desc"',
      ],
      [
        'a dotted order column',
        q({ order: [{ column: 'phone_numbers.number' }] }),
        'order[0].column may not be dotted: order by columns of people itself',
      ],
      ['an unknown order column', q({ order: [{ column: 'age' }] }), 'order[0].column: unknown column "age"'],
      [
        'filters that are not an array',
        q({ filters: {} }),
        'filters must be an array of {operand, operator, value}',
      ],
      [
        'over 20 filters',
        q({ filters: Array(21).fill(filter('id', '=', 1)) }),
        'filters may have at most 20 elements',
      ],
    ])('%s', (_case, rawQ, message) => {
      expect(errorsOf(rawQ)).toEqual({ q: [message] });
    });

    it('over 8 KiB in UTF-8 bytes, although under 8192 characters', () => {
      const rawQ = q({ filters: [filter('last_name', '=', 'é'.repeat(4100))] });
      expect(rawQ.length).toBeLessThan(8192);
      expect(errorsOf(rawQ)).toEqual({ q: ['must be at most 8192 bytes of JSON'] });
    });

    it('ordering by a relation', () => {
      expect(errorsOf(q({ order: [{ column: 'phone_numbers' }] })).q![0]).toMatch(
        /^order\[0\]\.column: "phone_numbers" is a relation/,
      );
    });
  });

  describe('refuses one filter, naming it', () => {
    it.each([
      ['an element that is not an object', ['last_name'], 'q.filters[0]'],
      ['an unknown key', [{ ...filter('id', '=', 1), negate: true }], 'q.filters[0]'],
      ['a missing operand', [{ operator: '=', value: 1 }], 'q.filters[0].operand'],
      ['an operand that is not a string', [filter(['id'] as never, '=', 1)], 'q.filters[0].operand'],
      ['an unknown column', [filter('id', '=', 1), filter('age', '=', 1)], 'q.filters[1].operand'],
      ['a column of an unknown relation', [filter('addresses.city', '=', 'X')], 'q.filters[0].operand'],
      ['a relation instead of a column', [filter('phone_numbers', '=', 'X')], 'q.filters[0].operand'],
      [
        'a reference instead of a column',
        [filter('phone_numbers.phone_number_type', '=', 'X')],
        'q.filters[0].operand',
      ],
      ['a column used as a relation', [filter('last_name.length', '=', 1)], 'q.filters[0].operand'],
      ['an empty segment', [filter('phone_numbers..number', '=', '1')], 'q.filters[0].operand'],
      ['an inherited property name', [filter('constructor', '=', '1')], 'q.filters[0].operand'],
      ['more than 3 relations', [filter('a.b.c.d.e', '=', 1)], 'q.filters[0].operand'],
      ['a missing operator', [{ operand: 'id', value: 1 }], 'q.filters[0].operator'],
      ['an unknown operator', [filter('id', '=', 1), filter('id', '==', 1)], 'q.filters[1].operator'],
      ['an operator in the wrong case', [filter('id', 'IN', [1])], 'q.filters[0].operator'],
      ['a missing value', [{ operand: 'id', operator: '=' }], 'q.filters[0].value'],
      ['a string for an integer column', [filter('id', '=', '1')], 'q.filters[0].value'],
      ['a fraction for an integer column', [filter('version', '>', 1.5)], 'q.filters[0].value'],
      [
        'a number for a string column',
        [filter('id', '=', 1), filter('id', '=', 2), filter('last_name', '=', 1)],
        'q.filters[2].value',
      ],
      ['a boolean for a string column', [filter('phone_numbers.number', '=', true)], 'q.filters[0].value'],
      ['a malformed timestamp', [filter('created_at', '>', '2026-11-21 07:30')], 'q.filters[0].value'],
      [
        'a timestamp without time zone',
        [filter('updated_at', '>', '2026-11-21T07:30:00')],
        'q.filters[0].value',
      ],
      ['a number for a timestamp column', [filter('created_at', '>', 1732174200000)], 'q.filters[0].value'],
      ['null with >', [filter('last_name', '>', null)], 'q.filters[0].value'],
      ['null with in', [filter('last_name', 'in', null)], 'q.filters[0].value'],
      ['a scalar with in', [filter('last_name', 'in', 'Smith')], 'q.filters[0].value'],
      ['an array with =', [filter('last_name', '=', ['Smith'])], 'q.filters[0].value'],
      ['a null inside an in list', [filter('last_name', 'in', ['Smith', null])], 'q.filters[0].value'],
      [
        'a wrongly typed value inside a not in list',
        [filter('id', 'not in', [1, '2'])],
        'q.filters[0].value',
      ],
      [
        'over 1000 values',
        [
          filter(
            'id',
            'in',
            Array.from({ length: 1001 }, (_, i) => i),
          ),
        ],
        'q.filters[0].value',
      ],
      ['a NUL character', [filter('last_name', '=', 'a\u0000')], 'q.filters[0].value'],
    ])('%s', (_case, filters, key) => {
      expect(filterErrorKeys(...filters)).toEqual([key]);
    });

    it('with messages that say what is wrong', () => {
      expect(
        errorsOf(
          q({
            filters: [
              filter('phone_numbers', '=', 'X'),
              filter('a.b.c.d.e', '=', 1),
              filter('id', 'like', 1),
              filter('last_name', 'in', ['Smith', 3]),
              { operand: 'id', operator: '=' },
            ],
          }),
        ),
      ).toEqual({
        'q.filters[0].operand': [
          '"phone_numbers" is a relation, not a column: name one of its columns, such as "phone_numbers.number"',
        ],
        'q.filters[1].operand': ['may follow at most 3 relations'],
        'q.filters[2].operator': ['must be one of =, !=, >, <, >=, <=, in, not in'],
        'q.filters[3].value': ['[1] must be a string'],
        'q.filters[4].value': ['is required'],
      });
      expect(errorsOf(q({ filters: [filter('shipments', '=', 1)] }), fulfillmentOrders)).toEqual({
        'q.filters[0].operand': [
          '"shipments" is a relation, not a column: name one of its columns, such as "shipments.id"',
        ],
      });
    });

    it('reporting problems with q and with filters together', () => {
      expect(errorsOf(q({ limit: 0, filters: [filter('age', '=', 1)] }))).toEqual({
        q: ['limit must be an integer from 1 to 500'],
        'q.filters[0].operand': ['unknown column "age"'],
      });
    });

    it('checking values against the column at the end of a path', () => {
      expect(
        Object.keys(errorsOf(q({ filters: [filter('packages.lines.quantity', '>', '1')] }), shipments)),
      ).toEqual(['q.filters[0].value']);
      expect(Object.keys(errorsOf(q({ filters: [filter('ship_to.country', '=', 1)] }), orders))).toEqual([
        'q.filters[0].value',
      ]);
    });
  });
});
