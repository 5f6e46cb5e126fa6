import { z } from 'zod';
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

/** `errors` of an answer that succeeded (API.md §2). */
const ERRORS_NONE = z.null().describe('null: no error');

/** The envelope of one result (API.md §2), named `id`. */
export function singleEnvelopeOf(result: z.ZodType, id: string): z.ZodType {
  return z
    .strictObject({
      count: z.literal(1).describe('1: one record'),
      results: result.meta({ description: 'The result' }),
      errors: ERRORS_NONE,
    })
    .meta({ id, ...enveloped(result, (example) => singleEnvelope(example)) });
}

/** The examples of an envelope, made from the first example of its result's schema (if it has one). */
function enveloped(result: z.ZodType, envelope: (example: unknown) => unknown): { examples?: unknown[] } {
  const [example] = (z.globalRegistry.get(result)?.examples ?? []) as unknown[];
  return example === undefined ? {} : { examples: [envelope(example)] };
}

/** The envelope of a page of results (API.md §2), named `id`. */
export function pageEnvelopeOf(result: z.ZodType, id: string): z.ZodType {
  return z
    .strictObject({
      count: z.int().min(0).describe('Results in this page'),
      total_results: z.int().min(0).describe('Every match, whatever limit and offset'),
      offset: z.int().min(0).describe('The offset used'),
      results: z.array(result).describe('The page, in the order asked for (then by id)'),
      errors: ERRORS_NONE,
    })
    .meta({ id, ...enveloped(result, (example) => searchEnvelope([example], 1, 0)) });
}

/** Every error (API.md §2-3): `errors` by column path, or `base`. */
export const errorEnvelopeSchema = z
  .strictObject({
    count: z.literal(0).describe('0 on errors'),
    results: z.null().describe('null on errors'),
    errors: z
      .record(z.string(), z.array(z.string()))
      .describe('Messages by column path (`lines[2].quantity`, `q.filters[1].operator`), or under `base`'),
  })
  .meta({
    id: 'ErrorEnvelope',
    description:
      'errors by column path (`lines[2].quantity`, `q.filters[1].operator`) or `base`, each a list of messages',
    examples: [
      errorEnvelope({
        'lines[1].quantity': ['must be at least 1'],
        currency: ['must be an ISO 4217 currency code such as USD'],
      }),
    ],
  });
