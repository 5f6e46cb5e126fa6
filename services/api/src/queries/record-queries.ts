import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import pg from 'pg';
import {
  compileGet,
  compileSearch,
  parseQuery,
  type CompiledQuery,
  type ModelDefinition,
  type SearchRowText,
} from '@ofp/models';
import type { Pool } from '@ofp/runtime';

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

/** A search compiled for one organization, kept by its model and `q` text for any organization. */
interface CompiledSearch {
  readonly statement: pg.QueryConfig & { name: string };
  /** The statement's values; the first is the organization. */
  readonly values: readonly unknown[];
  readonly offset: number;
}

/**
 * How many compiled searches a process keeps, and their text's bytes at most: clients repeat the
 * same few `q` texts (a poll for what changed, a lookup by sku), whose parsing, validation and
 * compiling cost more of the api's CPU than the rest of a cheap search.
 */
const SEARCHES_KEPT = 2_000;
const SEARCH_BYTES_KEPT = 8 * 1024 * 1024;

/** Reads from the read model: each search and each get is one parameterized statement. */
export class RecordQueries {
  private readonly searches = new LRUCache<string, CompiledSearch>({
    max: SEARCHES_KEPT,
    maxSize: SEARCH_BYTES_KEPT,
    sizeCalculation: (compiled, key) => key.length + compiled.statement.text.length,
  });

  constructor(private readonly pool: Pool) {}

  async search(model: ModelDefinition, orgId: number, rawQ: string | undefined): Promise<SearchPageJson> {
    const { statement, offset } = this.compiled(model, orgId, rawQ);
    const { rows } = await this.pool.query<SearchRowText>(statement);
    const row = rows[0]!;
    return { count: row.count, totalResults: row.total_results, offset, results: row.results };
  }

  /**
   * The statement of a search. The organization is the statement's first parameter (compileSearch
   * adds it first), so a search compiled for one organization serves another with that value changed.
   */
  private compiled(model: ModelDefinition, orgId: number, rawQ: string | undefined): CompiledSearch {
    const key = `${model.name}\n${rawQ ?? ''}`;
    const kept = this.searches.get(key);
    if (kept) {
      const values = [orgId, ...kept.values.slice(1)];
      return { ...kept, statement: { ...kept.statement, values }, values };
    }
    const query = parseQuery(model, rawQ);
    const statement = preparedQuery(compileSearch(model, orgId, query));
    const compiled = { statement, values: statement.values as unknown[], offset: query.offset };
    this.searches.set(key, compiled);
    return compiled;
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
 * A named (server-side prepared) statement: a search of the same shape, whatever its values, is
 * planned once per connection. Planning these statements costs about as much as running them. The
 * statements a connection keeps are bounded by the pool retiring connections (`maxUses`). JSON comes
 * back as the text Postgres sent.
 */
export function preparedQuery(query: CompiledQuery): pg.QueryConfig & { name: string } {
  return {
    name: `q_${createHash('sha1').update(query.text).digest('base64url')}`,
    ...query,
    types: JSON_AS_TEXT,
  };
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
