import type { RecordJson } from '@ofp/contracts';
import { getRecord, parseQuery, searchRecords, type ModelDefinition } from '@ofp/models';
import type { Pool } from '@ofp/runtime';

export interface SearchPage {
  readonly records: RecordJson[];
  readonly totalResults: number;
  readonly offset: number;
}

/** Reads from the read model: each search and each get is one parameterized statement. */
export class RecordQueries {
  constructor(private readonly pool: Pool) {}

  async search(model: ModelDefinition, orgId: number, rawQ: string | undefined): Promise<SearchPage> {
    const query = parseQuery(model, rawQ);
    const row = await searchRecords(this.pool, model, orgId, query);
    return { records: row.results as RecordJson[], totalResults: row.total_results, offset: query.offset };
  }

  async get(model: ModelDefinition, orgId: number, id: number): Promise<RecordJson | undefined> {
    return (await getRecord(this.pool, model, orgId, id)) as RecordJson | undefined;
  }
}
