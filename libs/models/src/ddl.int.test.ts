import { createTestDatabase, type TestDatabase } from '@ofp/testing';
import { readModelDdl } from './ddl.js';
import { MODELS } from './registry.js';

describe('readModelDdl on Postgres', () => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase();
  });

  afterAll(async () => {
    await db.drop();
  });

  // Index-only scans skip the table only where the visibility map is set, and each projected write
  // clears it: the read model's tables are vacuumed after 1% of their rows changed (issue 25).
  it('has every read-model table vacuumed after 1% of its rows changed, and runs again unchanged', async () => {
    const ddl = readModelDdl(Object.values(MODELS));
    await db.pool.query(ddl);
    await db.pool.query(ddl);
    const { rows } = await db.pool.query<{ relname: string; reloptions: string[] | null }>(
      `SELECT c.relname, c.reloptions FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'read' AND c.relkind = 'r' AND c.relname NOT IN ('deleted_records', 'record_counts')`,
    );
    expect(rows.length).toBeGreaterThan(Object.keys(MODELS).length);
    for (const { relname, reloptions } of rows)
      expect([relname, reloptions]).toEqual([
        relname,
        expect.arrayContaining([
          'autovacuum_vacuum_scale_factor=0.01',
          'autovacuum_vacuum_insert_scale_factor=0.01',
        ]),
      ]);
  });
});
