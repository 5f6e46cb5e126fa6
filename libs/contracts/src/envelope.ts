import type { FieldErrors } from './errors.js';

/** The response envelope of every `/v2` model endpoint (API.md §2). */
export type Envelope<T> =
  | { count: number; results: T; errors: null }
  | { count: number; total_results: number; offset: number; results: T[]; errors: null }
  | { count: 0; results: null; errors: FieldErrors };

export function singleEnvelope<T>(record: T): Envelope<T> {
  return { count: 1, results: record, errors: null };
}

export function searchEnvelope<T>(records: T[], totalResults: number, offset: number): Envelope<T> {
  return { count: records.length, total_results: totalResults, offset, results: records, errors: null };
}

export function errorEnvelope(errors: FieldErrors): Envelope<never> {
  return { count: 0, results: null, errors };
}
