import pg from 'pg';
import {
  compileGet,
  compileSearch,
  parseQuery,
  type CompiledQuery,
  type ModelDefinition,
  type SearchRowText,
} from '@ofp/models';
import { prepared, type Pool } from '@ofp/runtime';
import { unsettledFor } from './read-your-writes.js';

/**
 * A search page as JSON text, straight from Postgres: the read model renders records as JSON, so
 * parsing them only to serialize them again would spend the api's CPU on nothing.
 */
export interface SearchPageJson {
  readonly count: number;
  readonly totalResults: number;
  readonly offset: number;
  /** The JSON array of records. */
  readonly results: string;
}

/** A record as JSON text, with the version its ETag names. */
export interface RecordJsonText {
  readonly version: number;
  readonly json: string;
}

/**
 * Reads from the read model: each search and each get is one parameterized statement, which also
 * tells whether the organization has a write answered before the read model showed it (API.md §5).
 * Then `catchUp` waits until it does (or answers 503) and the read runs again: it then shows every
 * write answered before the first statement began.
 */
export class RecordQueries {
  constructor(
    private readonly pool: Pool,
    private readonly catchUp: (orgId: number) => Promise<void>,
  ) {}

  async search(model: ModelDefinition, orgId: number, rawQ: string | undefined): Promise<SearchPageJson> {
    const query = parseQuery(model, rawQ);
    const compiled = compileSearch(model, orgId, query);
    const parameter = `$${compiled.values.length + 1}`;
    const [row] = await this.read<SearchRowText>(orgId, {
      text: `SELECT page.*, ${unsettledFor(parameter)} AS unsettled FROM (${compiled.text}) AS page`,
      values: [...compiled.values, orgId],
    });
    return {
      count: row!.count,
      totalResults: row!.total_results,
      offset: query.offset,
      results: row!.results,
    };
  }

  async get(model: ModelDefinition, orgId: number, id: number): Promise<RecordJsonText | undefined> {
    const compiled = compileGet(model, orgId, id);
    const parameter = `$${compiled.values.length + 1}`;
    const [row] = await this.read<{ version: string | null; record: string | null }>(orgId, {
      text: `SELECT found.*, owed.unsettled FROM (SELECT ${unsettledFor(parameter)} AS unsettled) AS owed
        LEFT JOIN LATERAL (${compiled.text}) AS found ON true`,
      values: [...compiled.values, orgId],
    });
    return row!.record === null ? undefined : { version: Number(row!.version), json: row!.record };
  }

  /** One row with `unsettled` (a get's fields null when it found nothing), after catching up if need be. */
  private async read<Row>(orgId: number, statement: CompiledQuery): Promise<Row[]> {
    const first = await this.pool.query<Row & { unsettled: boolean }>(preparedQuery(statement));
    if (!first.rows[0]!.unsettled) return first.rows;
    await this.catchUp(orgId);
    return (await this.pool.query<Row & { unsettled: boolean }>(preparedQuery(statement))).rows;
  }
}

/**
 * A named (server-side prepared) statement (see `prepared`): a search of the same shape, whatever its
 * values, is planned once per connection. JSON comes back as the text Postgres sent.
 */
export function preparedQuery(query: CompiledQuery): pg.QueryConfig & { name: string } {
  return { ...prepared(query.text, query.values), types: JSON_AS_TEXT };
}

/** Postgres's `json` type, whose values these statements take as text. */
const JSON_OID = 114;

function textParser(oid: number): (value: string) => unknown {
  if (oid === JSON_OID) return (value) => value;
  return pg.types.getTypeParser(oid, 'text') as (value: string) => unknown;
}

const JSON_AS_TEXT: pg.CustomTypesConfig = { getTypeParser: textParser };

/** The search envelope (API.md §2) around a page of JSON text. */
export function searchEnvelopeJson(page: SearchPageJson): string {
  return `{"count":${page.count},"total_results":${page.totalResults},"offset":${page.offset},"results":${page.results},"errors":null}`;
}

/** The single-record envelope (API.md §2) around a record's JSON text. */
export function singleEnvelopeJson(record: RecordJsonText): string {
  return `{"count":1,"results":${record.json},"errors":null}`;
}
