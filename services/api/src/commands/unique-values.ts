import { fieldError } from '@ofp/contracts';
import { prepared, type Pool, type PoolClient } from '@ofp/runtime';

/** A field value that must be unique per organization and model. */
export interface UniqueValue {
  readonly field: string;
  readonly value: string;
}

/**
 * Reservations of unique values (`api.unique_values`), written in the same transaction as the
 * events that set them: two concurrent writers of one value cannot both commit.
 */
export class UniqueValues {
  constructor(private readonly pool: Pool) {}

  /**
   * Makes `values` the record's reservations for these fields: releases the old values of the
   * fields given and reserves the new ones. A value another record holds is a 409 naming the field.
   */
  async reserve(
    client: PoolClient,
    orgId: number,
    model: string,
    recordId: number,
    fields: readonly string[],
    values: readonly UniqueValue[],
  ): Promise<void> {
    if (fields.length > 0) {
      await client.query(
        prepared(
          'DELETE FROM api.unique_values WHERE model = $1 AND record_id = $2 AND field = ANY($3::text[])',
          [model, recordId, fields],
        ),
      );
    }
    for (const { field, value } of values) {
      const inserted = await client.query(
        prepared(
          `INSERT INTO api.unique_values (org_id, model, field, value, record_id) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT DO NOTHING`,
          [orgId, model, field, value, recordId],
        ),
      );
      if (inserted.rowCount === 0) throw fieldError('Conflict', field, 'has already been taken');
    }
  }

  /** Releases every reservation of a deleted record. */
  async release(client: PoolClient, model: string, recordId: number): Promise<void> {
    await client.query('DELETE FROM api.unique_values WHERE model = $1 AND record_id = $2', [
      model,
      recordId,
    ]);
  }

  /** The record holding a value, e.g. a phone number type by name. */
  async lookup(orgId: number, model: string, field: string, value: string): Promise<number | undefined> {
    return (await this.lookupAll(orgId, model, field, [value])).get(value);
  }

  /** The records holding any of `values` of one field, by value, in one statement. */
  async lookupAll(
    orgId: number,
    model: string,
    field: string,
    values: readonly string[],
  ): Promise<Map<string, number>> {
    if (values.length === 0) return new Map();
    const { rows } = await this.pool.query<{ value: string; record_id: number }>(
      prepared(
        `SELECT value, record_id FROM api.unique_values
       WHERE org_id = $1 AND model = $2 AND field = $3 AND value = ANY($4::text[])`,
        [orgId, model, field, values],
      ),
    );
    return new Map(rows.map((row) => [row.value, row.record_id]));
  }
}
