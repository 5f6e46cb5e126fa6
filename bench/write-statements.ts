// `npm run bench:write-statements` (issue 25 item 5): which statements a person write with read-your-writes
// costs Postgres, counted by pg_stat_statements over BENCH_WRITES (2,000) writes at concurrency 1 and 16
// (the api's, the projector's, the bus readers' and every other consumer's in the platform): statements
// and transactions per write, shared buffers per write (hit, read or dirtied, by the statements), WAL per
// write (pg_stat_wal: the whole cluster's, commits and autovacuum included; records, full-page images and
// bytes, which the images make move with the checkpoints' timing), each statement's executions,
// execution time and buffers per write, and the Postgres CPU per write of each of the platform's
// connections by application name (its pool: the api's appends and the projector's batches; the bus's
// readers; its session, which LISTENs). A count does not depend on the machine's load, as CPU time does.
// The test Postgres is started with pg_stat_statements loaded for the run (and set back after it); a
// DATABASE_URL must have it loaded.

import pg from 'pg';
import { Pool as HttpPool } from 'undici';
import { createIntegrator, startPlatform, testLogger, UNLIMITED_RATE } from '@ofp/testing';
import { measure, processes, warmUp, withCpu, type CpuParticipant } from './measure.js';
import { databaseWithStatements } from './statements.js';

const WRITES = Number(process.env.BENCH_WRITES ?? 2_000);
const CONCURRENCIES = [1, 16];
const logger = testLogger('bench');

interface StatementRow {
  calls: string;
  total_exec_time: number;
  buffers: string;
  query: string;
}

const database = await databaseWithStatements(logger, 'bench_write_statements');
const admin = new pg.Client({ connectionString: database.url });
await admin.connect();
const platform = await startPlatform({ databaseUrl: database.url, env: { ...UNLIMITED_RATE } });
try {
  const integrator = await createIntegrator(platform, { name: 'Bench' });
  const { rows: ids } = await admin.query<{ oid: number }>(
    'SELECT oid FROM pg_database WHERE datname = current_database()',
  );
  const dbid = ids[0]!.oid;
  const committed = async (): Promise<number> =>
    Number(
      (
        await admin.query<{ n: string }>('SELECT xact_commit AS n FROM pg_stat_database WHERE datid = $1', [
          dbid,
        ])
      ).rows[0]!.n,
    );
  const wal = async (): Promise<{ records: number; fpi: number; bytes: number }> => {
    const { rows } = await admin.query<{ records: string; fpi: string; bytes: string }>(
      'SELECT wal_records AS records, wal_fpi AS fpi, wal_bytes AS bytes FROM pg_stat_wal',
    );
    return { records: Number(rows[0]!.records), fpi: Number(rows[0]!.fpi), bytes: Number(rows[0]!.bytes) };
  };
  // The platform's backends by application name, listed once before a run (its pools are connected by
  // the warm-up), so that the meter adds no statement or transaction to what is counted.
  const platformConnections = async (): Promise<CpuParticipant[]> => {
    const { rows } = await admin.query<{ name: string; pids: number[] }>(
      `SELECT application_name AS name, array_agg(pid) AS pids FROM pg_stat_activity
        WHERE datname = current_database() AND application_name LIKE 'ofp-%' GROUP BY 1 ORDER BY 1`,
    );
    return rows.map(({ name, pids }) => processes(name, pids));
  };
  for (const concurrency of CONCURRENCIES) {
    const http = new HttpPool(platform.apiUrl, { connections: concurrency });
    const person = async (i: number): Promise<void> => {
      const response = await http.request({
        method: 'POST',
        path: '/v2/people',
        headers: { authorization: `Bearer ${integrator.accessToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ last_name: `Bench ${i}` }),
      });
      const text = await response.body.text();
      if (response.statusCode !== 201) throw new Error(`/v2/people: ${response.statusCode} ${text}`);
    };
    await warmUp(2, concurrency, person);
    const connections = await platformConnections();
    await admin.query('SELECT pg_stat_statements_reset()');
    const before = await committed();
    const walBefore = await wal();
    const { result: run, cpu } = await withCpu(connections, () => measure(WRITES, concurrency, person));
    const transactions = (await committed()) - before;
    const walAfter = await wal();
    const { rows } = await admin.query<StatementRow>(
      `SELECT calls, total_exec_time, shared_blks_hit + shared_blks_read + shared_blks_dirtied AS buffers,
              regexp_replace(query, '\\s+', ' ', 'g') AS query
         FROM pg_stat_statements
        WHERE dbid = $1 AND query NOT LIKE '%pg_stat_%'
        ORDER BY calls DESC, total_exec_time DESC`,
      [dbid],
    );
    const perWrite = (n: number): string => (n / WRITES).toFixed(2);
    const statements = rows.reduce((sum, row) => sum + Number(row.calls), 0);
    const executing = rows.reduce((sum, row) => sum + row.total_exec_time, 0);
    const buffers = rows.reduce((sum, row) => sum + Number(row.buffers), 0);
    console.log(
      `\n${WRITES.toLocaleString('en')} person writes at concurrency ${concurrency} (${run.perSecond.toFixed(0)}/s): ` +
        `${perWrite(statements)} statements and ${perWrite(transactions)} transactions per write, ` +
        `${((executing * 1000) / WRITES).toFixed(0)} µs of execution, ${perWrite(buffers)} shared buffers; ` +
        `WAL: ${perWrite(walAfter.records - walBefore.records)} records, ${perWrite(walAfter.fpi - walBefore.fpi)} full-page images, ` +
        `${((walAfter.bytes - walBefore.bytes) / WRITES).toFixed(0)} bytes`,
    );
    console.log(
      `Postgres CPU per write by connection: ${[...cpu]
        .map(
          ([name, seconds]) =>
            `${name} ${seconds === undefined ? 'n/a' : ((seconds * 1e6) / WRITES).toFixed(0)} µs`,
        )
        .join(', ')}`,
    );
    console.log('per write | µs | buffers | statement');
    for (const row of rows.filter((each) => Number(each.calls) >= WRITES / 100))
      console.log(
        `${perWrite(Number(row.calls)).padStart(9)} | ${((row.total_exec_time * 1000) / WRITES).toFixed(0).padStart(4)} | ${perWrite(Number(row.buffers)).padStart(7)} | ${row.query.slice(0, 110)}`,
      );
    await http.close();
  }
} finally {
  await admin.end();
  await platform.stop();
  await database.stop();
}
