import pg from 'pg';
import { createPool, inTransaction } from './postgres.js';

describe('createPool', () => {
  it('survives a checked-out client losing its connection between statements, and goes on serving', async () => {
    const pool = createPool({
      connectionString: process.env.DATABASE_URL!,
      applicationName: 'pool-test',
      max: 2,
    });
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL! });
    await admin.connect();
    try {
      // Terminated while idle in its transaction, as every backend is when Postgres crashes: the FATAL
      // arrives with no statement in flight, and pg emits it as an 'error' event on the client.
      const transaction = inTransaction(pool, async (client) => {
        const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        const closed = new Promise((resolve) => client.once('end', resolve));
        await admin.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
        await closed;
        await client.query('SELECT 1');
      });
      await expect(transaction).rejects.toThrow();
      const { rows } = await pool.query<{ one: number }>('SELECT 1 AS one');
      expect(rows).toEqual([{ one: 1 }]);
    } finally {
      await admin.end();
      await pool.end();
    }
  });
});
