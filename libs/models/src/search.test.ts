import { parseQuery } from './query.js';
import { column, defineModel, type ModelDefinition } from './fields.js';
import { fulfillmentOrders, people, shipments } from './registry.js';
import { compileGet, compileSearch } from './search.js';

const compile = (model: ModelDefinition, q: unknown) =>
  compileSearch(model, 42, parseQuery(model, JSON.stringify(q)));
const filter = (operand: string, operator: string, value: unknown) => ({ operand, operator, value });
/** The page's WHERE clause. */
const pageWhere = (text: string) => text.slice(text.indexOf('WHERE'), text.indexOf('ORDER BY'));

describe('compileSearch', () => {
  it('passes values only as parameters', () => {
    const hostile = "x'; DROP TABLE read.people; --";
    const { text, values } = compile(people, {
      filters: [filter('last_name', '=', hostile), filter('phone_numbers.number', 'in', [hostile])],
    });
    expect(text).not.toContain('DROP');
    expect(values).toEqual(expect.arrayContaining([42, hostile, [hostile]]));
  });

  it('tests filters on the same relation in one subquery, and deeper shared paths in one nested subquery', () => {
    const { text } = compile(shipments, {
      filters: [
        filter('packages.lines.sku', '=', 'A'),
        filter('carrier', '=', 'UPS'),
        filter('packages.tracking_number', '=', 'T1'),
        filter('packages.lines.quantity', '>', 1),
      ],
    });
    const where = pageWhere(text);
    expect(where.match(/EXISTS/g)).toHaveLength(2);
    expect(where).toMatch(
      /EXISTS \(SELECT 1 FROM "read"."shipments__packages" .*EXISTS \(SELECT 1 FROM "read"."shipments__packages__lines"/,
    );
  });

  it('joins a joined relation through the columns it names', () => {
    const { text } = compile(fulfillmentOrders, {
      filters: [filter('shipments.packages.tracking_number', '=', '1Z')],
    });
    expect(pageWhere(text)).toMatch(
      /EXISTS \(SELECT 1 FROM "read"."shipments" (t\d+) WHERE \1.org_id = \$1::bigint AND \1."fulfillment_order_id" = t0."id" AND EXISTS/,
    );
  });

  it('follows different relations in different subqueries', () => {
    const { text } = compile(people, {
      filters: [
        filter('phone_numbers.number', '=', '1'),
        filter('id', '>', 1),
        filter('phone_numbers.number', '=', '2'),
      ],
    });
    expect(pageWhere(text).match(/EXISTS/g)).toHaveLength(1);
  });

  it('filters every table it reads by the organization', () => {
    const { text } = compile(people, {
      filters: [filter('phone_numbers.phone_number_type.name', '=', 'Work')],
    });
    const tables = text.match(/(FROM|JOIN) "read"."\w+" t\d+/g) ?? [];
    expect(tables.length).toBeGreaterThan(4);
    for (const table of tables) {
      const alias = table.split(' ').at(-1)!;
      expect(text).toContain(`${alias}.org_id = $1::bigint`);
    }
  });

  it('breaks ties by id unless the order already names it', () => {
    expect(compile(people, { order: [{ column: 'last_name', direction: 'desc' }] }).text).toContain(
      'ORDER BY t0."last_name" DESC NULLS FIRST, t0.id ASC',
    );
    expect(compile(people, { order: [{ column: 'id', direction: 'desc' }] }).text).toContain(
      'ORDER BY t0."id" DESC NULLS FIRST\n',
    );
  });

  it("reads the first page's documents with its rows, a later page's by id, and renders a model's that stores none", () => {
    const first = compile(people, { order: [{ column: 'last_name' }] }).text;
    expect(first).toMatch(/SELECT t0.id, t0."last_name", t0."document" AS document FROM "read"."people" t0/);
    expect(first).toContain(
      `string_agg((page.document)::text, ',' ORDER BY page."last_name" ASC NULLS LAST, page.id ASC)`,
    );
    expect(first).not.toContain('row_to_json');
    const later = compile(people, { offset: 50 }).text;
    expect(later).toMatch(
      /string_agg\(\((t\d+)."document"\)::text, ',' ORDER BY page.id ASC\).*JOIN "read"."people" \1 ON \1.id = page.id/s,
    );
    // A model whose rows another writer keeps (the webhook delivery queue) is rendered at read time.
    const queue = defineModel({
      name: 'queue_entries',
      singular: 'queue_entry',
      writeScope: 'write',
      storedDocuments: false,
      fields: { status: column.string() },
    });
    const rendered = compile(queue, {}).text;
    expect(rendered).toMatch(/string_agg\(\(\(SELECT row_to_json\(t\d+\) FROM \(SELECT t\d+."id" AS "id", /);
    expect(rendered).not.toContain('"document"');
  });
});

describe('compileGet', () => {
  it('looks the record up by id within the organization', () => {
    expect(compileGet(people, 42, 7)).toMatchObject({ values: [42, 7] });
    expect(compileGet(people, 42, 7).text).toMatch(/WHERE t0.org_id = \$1::bigint AND t0.id = \$2::bigint$/);
  });
});
