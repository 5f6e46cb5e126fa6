import { REVOCATIONS_STREAM_TYPE } from '@ofp/auth-tokens';
import { intakeStreamTypes } from '@ofp/webhook-dispatcher';

/**
 * The schemas of the event data, named by each Kafka message's `ce_dataschema` (CloudEvents §3.1.2):
 * a record's change, or a revocation. The AsyncAPI document names them in its messages (the header's
 * `const`); a new major version of a body gets a new name.
 */
export const DATA_SCHEMAS = {
  recordChange: 'urn:ofp:schema:record-change:1',
  grantRevoked: 'urn:ofp:schema:grant-revoked:1',
} as const;

/** The schema of a stream type's event data: every stream but the revocations carries record changes. */
export function dataSchemaOf(streamType: string): string {
  return streamType === REVOCATIONS_STREAM_TYPE ? DATA_SCHEMAS.grantRevoked : DATA_SCHEMAS.recordChange;
}

/**
 * Every stream the platform appends to: the models' records, the webhooks' own, the revocations. The
 * api's relay publishes all of them and the consumers read nearly all, so each Kafka process checks
 * them all at start; the chart's KafkaTopic resources are the same list (`npm run describe` writes it
 * into charts/ofp/templates/_helpers.tpl).
 */
export function platformStreamTypes(): string[] {
  return [...intakeStreamTypes(), REVOCATIONS_STREAM_TYPE];
}
