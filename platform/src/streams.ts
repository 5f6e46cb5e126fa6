import { REVOCATIONS_STREAM_TYPE } from '@ofp/bus';
import { intakeStreamTypes } from '@ofp/webhook-dispatcher';

/**
 * Every stream the platform appends to: the models' records, the webhooks' own, the revocations. The
 * api's relay publishes all of them and the consumers read nearly all, so each Kafka process checks
 * them all at start; the chart's KafkaTopic resources are the same list (a test compares them).
 */
export function platformStreamTypes(): string[] {
  return [...intakeStreamTypes(), REVOCATIONS_STREAM_TYPE];
}
