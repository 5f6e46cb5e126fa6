import { createTestDatabase, type TestDatabase } from './postgres.js';

describe('createTestDatabase', () => {
  let a: TestDatabase;
  let b: TestDatabase;
  beforeAll(async () => {
    [a, b] = await Promise.all([createTestDatabase(), createTestDatabase()]);
  });
  afterAll(async () => {
    await Promise.all([a.drop(), b.drop()]);
  });

  it('gives each caller a database of its own', async () => {
    await a.pool.query('CREATE TABLE t (x int)');
    const seen = await b.pool.query("SELECT count(*)::int AS n FROM pg_tables WHERE tablename = 't'");
    expect(seen.rows[0]).toEqual({ n: 0 });
  });
});
