// The statements a unit of work costs Postgres, counted by pg_stat_statements: `bench:write-statements`
// per person write, `bench:webhooks` (with BENCH_STATEMENTS=1) per delivery. A count does not depend on
// the machine's load, as CPU time does: it is the before/after evidence of a change to the statements.
import pg from 'pg';
import type { Logger } from '@ofp/runtime';
import { startScratchDatabase } from '@ofp/testing';

const EXTENSION = 'pg_stat_statements';

/**
 * A scratch database on a Postgres with pg_stat_statements loaded and created in it. The test Postgres is
 * the worktree's own: it is restarted with the extension loaded when it was not, and set back by `stop`.
 * A DATABASE_URL must have it loaded.
 */
export async function databaseWithStatements(
  logger: Logger,
  prefix: string,
): Promise<{ url: string; stop: () => Promise<void> }> {
  for (let attempt = 0; ; attempt++) {
    const database = await startScratchDatabase(logger, prefix);
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    const { rows } = await client.query<{ libraries: string }>(
      "SELECT current_setting('shared_preload_libraries') AS libraries",
    );
    if (
      rows[0]!.libraries
        .split(',')
        .map((name) => name.trim())
        .includes(EXTENSION)
    ) {
      await client.query(`CREATE EXTENSION IF NOT EXISTS ${EXTENSION}`);
      const loaded = attempt > 0;
      return {
        url: database.url,
        async stop() {
          if (loaded) await client.query('ALTER SYSTEM RESET shared_preload_libraries');
          await client.end();
          await database.stop();
        },
      };
    }
    if (process.env.DATABASE_URL || attempt > 0) {
      await client.end();
      await database.stop();
      throw new Error(`DATABASE_URL: shared_preload_libraries must include ${EXTENSION} for this benchmark`);
    }
    // The test Postgres is this worktree's own: load the extension at its next start.
    await client.query(`ALTER SYSTEM SET shared_preload_libraries = '${EXTENSION}'`);
    await client.end();
    await database.stop();
  }
}

export interface StatementRow {
  readonly calls: number;
  readonly rows: number;
  /** Shared buffers hit and read. */
  readonly buffers: number;
  readonly walBytes: number;
  /** Milliseconds of execution. */
  readonly execMs: number;
  readonly query: string;
}

export interface TableWrites {
  readonly table: string;
  readonly inserted: number;
  readonly updated: number;
  /** Updates that wrote no index entry (heap-only tuples). */
  readonly hot: number;
  readonly deleted: number;
}

export interface Census {
  /** Each statement's totals over the counted span, most called first. */
  readonly statements: readonly StatementRow[];
  /** Row writes of each table of the schemas counted. */
  readonly tables: readonly TableWrites[];
  /** Transactions committed in the database. */
  readonly transactions: number;
}

/**
 * Counts what the database's statements do from `start` until `stop`: statements, rows, buffers and WAL
 * (pg_stat_statements), transactions (pg_stat_database) and row writes per table of `schemas`
 * (pg_stat_user_tables: inserts, updates, HOT updates, deletes).
 */
export class StatementCensus {
  private constructor(
    private readonly client: pg.Client,
    private readonly schemas: readonly string[],
    private readonly before: { transactions: number; tables: readonly TableWrites[] },
  ) {}

  static async start(url: string, schemas: readonly string[]): Promise<StatementCensus> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query('SELECT pg_stat_statements_reset()');
    return new StatementCensus(client, schemas, await StatementCensus.read(client, schemas));
  }

  /** The counts since `start`. */
  async stop(): Promise<Census> {
    try {
      // Other backends flush their table and transaction counts at most once a second when idle.
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const after = await StatementCensus.read(this.client, this.schemas);
      const { rows } = await this.client.query<{
        calls: string;
        rows: string;
        buffers: string;
        wal_bytes: string;
        total_exec_time: number;
        query: string;
      }>(
        `SELECT calls, rows, shared_blks_hit + shared_blks_read AS buffers, wal_bytes, total_exec_time,
                regexp_replace(query, '\\s+', ' ', 'g') AS query
           FROM pg_stat_statements
          WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
            AND query NOT LIKE '%pg_stat_%'
          ORDER BY calls DESC, total_exec_time DESC`,
      );
      return {
        statements: rows.map((row) => ({
          calls: Number(row.calls),
          rows: Number(row.rows),
          buffers: Number(row.buffers),
          walBytes: Number(row.wal_bytes),
          execMs: row.total_exec_time,
          query: row.query,
        })),
        tables: after.tables.map((table) => {
          const was = this.before.tables.find((each) => each.table === table.table);
          return {
            table: table.table,
            inserted: table.inserted - (was?.inserted ?? 0),
            updated: table.updated - (was?.updated ?? 0),
            hot: table.hot - (was?.hot ?? 0),
            deleted: table.deleted - (was?.deleted ?? 0),
          };
        }),
        transactions: after.transactions - this.before.transactions,
      };
    } finally {
      await this.client.end();
    }
  }

  private static async read(
    client: pg.Client,
    schemas: readonly string[],
  ): Promise<{ transactions: number; tables: TableWrites[] }> {
    const { rows: database } = await client.query<{ n: string }>(
      'SELECT xact_commit AS n FROM pg_stat_database WHERE datname = current_database()',
    );
    const { rows } = await client.query<{
      table: string;
      inserted: string;
      updated: string;
      hot: string;
      deleted: string;
    }>(
      `SELECT relname AS table, n_tup_ins AS inserted, n_tup_upd AS updated, n_tup_hot_upd AS hot,
              n_tup_del AS deleted
         FROM pg_stat_user_tables WHERE schemaname = ANY($1) ORDER BY relname`,
      [schemas],
    );
    return {
      transactions: Number(database[0]!.n),
      tables: rows.map((row) => ({
        table: row.table,
        inserted: Number(row.inserted),
        updated: Number(row.updated),
        hot: Number(row.hot),
        deleted: Number(row.deleted),
      })),
    };
  }
}

/** The census per unit of work (`units` of them) as lines of text: totals, then each statement and table. */
export function formatCensus(census: Census, units: number, unit: string): string[] {
  const per = (n: number, digits = 2): string => (n / units).toFixed(digits);
  const sum = (pick: (row: StatementRow) => number): number =>
    census.statements.reduce((total, row) => total + pick(row), 0);
  const lines = [
    `per ${unit}: ${per(sum((row) => row.calls))} statements, ${per(census.transactions)} transactions, ` +
      `${per(sum((row) => row.rows))} rows, ${per(
        sum((row) => row.buffers),
        1,
      )} buffers, ` +
      `${per(
        sum((row) => row.walBytes),
        0,
      )} WAL bytes, ${per(sum((row) => row.execMs) * 1000, 0)} µs of execution`,
    `per ${unit} | rows | buffers | WAL bytes | µs | statement`,
  ];
  for (const row of census.statements.filter((each) => each.calls >= units / 1000))
    lines.push(
      `${per(row.calls, 3).padStart(9)} | ${per(row.rows).padStart(5)} | ${per(row.buffers, 1).padStart(7)} | ` +
        `${per(row.walBytes, 0).padStart(9)} | ${per(row.execMs * 1000, 0).padStart(4)} | ${row.query.slice(0, 110)}`,
    );
  lines.push(`per ${unit} | table | inserted | updated | of which HOT | deleted`);
  for (const table of census.tables.filter((each) => each.inserted + each.updated + each.deleted > 0))
    lines.push(
      `  ${table.table} | ${per(table.inserted)} | ${per(table.updated)} | ${per(table.hot)} | ${per(table.deleted)}`,
    );
  return lines;
}
