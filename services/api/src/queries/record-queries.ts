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

/** Reads from the read model: each search and each get is one parameterized statement. */
export class RecordQueries {
  constructor(private readonly pool: Pool) {}

  async search(model: ModelDefinition, orgId: number, rawQ: string | undefined): Promise<SearchPageJson> {
    const query = parseQuery(model, rawQ);
    const { rows } = await this.pool.query<SearchRowText>(preparedQuery(compileSearch(model, orgId, query)));
    const row = rows[0]!;
    return { count: row.count, totalResults: row.total_results, offset: query.offset, results: row.results };
  }

  async get(model: ModelDefinition, orgId: number, id: number): Promise<RecordJsonText | undefined> {
    const { rows } = await this.pool.query<{ version: string; record: string }>(
      preparedQuery(compileGet(model, orgId, id)),
    );
    const row = rows[0];
    return row && { version: Number(row.version), json: row.record };
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
