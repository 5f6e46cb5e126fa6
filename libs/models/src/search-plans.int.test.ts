import { createTestDatabase, type TestDatabase } from '@ofp/testing';
import { readModelDdl } from './ddl.js';
import { parseQuery } from './query.js';
import { people, phoneNumberTypes } from './registry.js';
import { compileSearch } from './search.js';

// The searches the benchmark measures must be answered from indexes, not by reading a whole table.
// 50,000 people with two phone numbers each are enough for the planner to prefer indexes where they
// help; the rows are generated in SQL because only the plans are under test here.

const ORG = 1;
/** Tables worth an index; the planner rightly scans small ones (types, counts) whole. */
const LARGE_TABLES = ['people', 'people__phone_numbers'];

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  Filter?: string;
  Plans?: PlanNode[];
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

describe('query plans over a large organization', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
    await db.pool.query(readModelDdl([phoneNumberTypes, people]));
    await db.pool.query(`
      INSERT INTO read.phone_number_types (id, org_id, name, created_at, updated_at, version)
        SELECT org * 10 + i, org, (ARRAY['Work', 'Home', 'Mobile', 'Fax'])[i], now(), now(), 1
        FROM generate_series(1, 2) org, generate_series(1, 4) i;
      INSERT INTO read.people (id, org_id, first_name, last_name, email, company, created_at, updated_at, version)
        SELECT g, CASE WHEN g <= 50000 THEN 1 ELSE 2 END, 'First' || (g % 500), 'Last' || ((g * 7919) % 1000),
          'user' || g || '@example.com', CASE WHEN g % 2 = 0 THEN 'Company' || (g % 100) END,
          timestamptz '2026-01-01' + g * interval '1 minute', timestamptz '2026-01-01' + g * interval '1 minute', 1
        FROM generate_series(1, 60000) g;
      INSERT INTO read.people__phone_numbers (org_id, record_id, ordinal, number, phone_number_type_id)
        SELECT p.org_id, p.id, o, (5550000000 + p.id * 2 + o)::text, p.org_id * 10 + 1 + (p.id + o) % 4
        FROM read.people p, generate_series(0, 1) o;
      INSERT INTO read.record_counts (model, org_id, count)
        SELECT 'people', org_id, count(*) FROM read.people GROUP BY org_id;
    `);
    // Index-only scans need the visibility map, which VACUUM sets (autovacuum would, later).
    await db.pool.query('VACUUM ANALYZE');
    // Seeding 60,000 people takes seconds on a busy two-core machine.
  }, 120_000);

  afterAll(async () => {
    await db.drop();
  });

  async function plan(q: unknown): Promise<PlanNode[]> {
    const { text, values } = compileSearch(people, ORG, parseQuery(people, JSON.stringify(q)));
    const { rows } = await db.pool.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(
      `EXPLAIN (FORMAT JSON) ${text}`,
      values,
    );
    return nodes(rows[0]!['QUERY PLAN'][0].Plan);
  }

  async function tablesReadWhole(q: unknown): Promise<string[]> {
    return (await plan(q))
      .filter((node) => node['Node Type'] === 'Seq Scan' && LARGE_TABLES.includes(node['Relation Name']!))
      .map((node) => node['Relation Name']!);
  }

  const filter = (operand: string, operator: string, value: unknown) => ({ operand, operator, value });

  it.each<[string, unknown]>([
    ['a plain filter', { filters: [filter('last_name', '=', 'Last42')] }],
    ['a two-column order', { order: [{ column: 'last_name' }, { column: 'first_name', direction: 'desc' }] }],
    ['a descending order over many nulls', { order: [{ column: 'company', direction: 'desc' }] }],
    ['a dotted filter', { filters: [filter('phone_numbers.number', '=', '5550012345')] }],
    [
      'a chained dotted filter',
      {
        filters: [
          filter('phone_numbers.phone_number_type.name', '=', 'Work'),
          filter('phone_numbers.number', '=', '5550012345'),
        ],
      },
    ],
    ['an in list', { filters: [filter('last_name', 'in', ['Last1', 'Last2', 'Last3', 'Last500'])] }],
    ['an offset of 10,000', { offset: 10000, order: [{ column: 'created_at', direction: 'desc' }] }],
  ])('%s reads no table whole', async (_case, q) => {
    expect(await tablesReadWhole(q)).toEqual([]);
  });

  // Filtered in id order, the page of an `in` list of many matches walked the primary key past every
  // other record until it had its matches, which the planner expects to find early, and which are
  // all at its end when the values are recent (issue 25: 261 ms at 200,000 people): its values are
  // looked up in an index instead, each one's first records in id order.
  it.each<[string, unknown]>([
    ['in id order', {}],
    ['in descending id order', { order: [{ column: 'id', direction: 'desc' }] }],
    ['ordered by the listed column', { order: [{ column: 'last_name', direction: 'desc' }] }],
  ])('an in list %s finds its page through the index of its column', async (_case, order) => {
    const names = Array.from({ length: 20 }, (_, k) => `Last${k * 50}`);
    const q = { ...(order as object), filters: [filter('last_name', 'in', names)] };
    const filtered = (await plan(q)).filter(
      (node) => node['Relation Name'] === 'people' && node.Filter?.includes('last_name'),
    );
    expect(filtered).toEqual([]);
  });

  it.each([
    ['company', 'asc'],
    ['company', 'desc'],
    ['created_at', 'desc'],
  ])('an order by %s %s, tie-break included, comes straight from an index', async (column, direction) => {
    const page = (await plan({ order: [{ column, direction }] })).find(
      (node) => node['Node Type'] === 'Limit',
    );
    expect(page?.Plans?.map((node) => node['Node Type'])).toEqual([
      expect.stringMatching(/^Index (Only )?Scan$/),
    ]);
  });
});
