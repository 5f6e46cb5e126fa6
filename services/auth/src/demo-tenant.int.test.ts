import { createTestDatabase, testLogger, type TestDatabase } from '@ofp/testing';
import { ensureDemoTenant } from './demo-tenant.js';
import { migrateAuth } from './module.js';
import { secretMatches } from './secrets.js';

describe('ensureDemoTenant', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase();
    await migrateAuth(database.pool, testLogger());
  });
  afterAll(() => database.drop());

  const deps = () => ({ pool: database.pool, clock: () => new Date() });

  it('creates the demo tenant once and returns the same credentials afterwards', async () => {
    const [a, b] = await Promise.all([ensureDemoTenant(deps()), ensureDemoTenant(deps())]);
    const later = await ensureDemoTenant(deps());
    expect([a.created, b.created].sort()).toEqual([false, true]);
    expect(later).toEqual({ ...a, created: false });
    expect(later.redirectUri).toBe('http://localhost:3000/callback');
    expect(later.scopes).toEqual(['read', 'write', 'operations']);
    const { rows } = await database.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM auth.clients');
    expect(rows[0]!.n).toBe(1);
  });

  it('stores the client secret hashed like any other', async () => {
    const tenant = await ensureDemoTenant(deps());
    const { rows } = await database.pool.query<{ secret_hash: Buffer }>(
      'SELECT secret_hash FROM auth.clients WHERE id = $1',
      [tenant.clientId],
    );
    expect(secretMatches(tenant.clientSecret, rows[0]!.secret_hash)).toBe(true);
  });
});
