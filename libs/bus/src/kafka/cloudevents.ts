import type { IHeaders, KafkaMessage, Message } from 'kafkajs';
import type { StoredEvent } from '@ofp/event-store';
import { validTraceparent } from '@ofp/runtime';

/** The stream type of the auth service's revocation announcements (`grant.revoked`), one stream each. */
export const REVOCATIONS_STREAM_TYPE = 'revocations';

/**
 * The schemas of the event data, named by each message's `ce_dataschema` (CloudEvents §3.1.2): a
 * record's change, or a revocation. The AsyncAPI document names them in its messages (the header's
 * `const`); a new major version of a body gets a new name.
 */
export const DATA_SCHEMAS = {
  recordChange: 'urn:ofp:schema:record-change:1',
  grantRevoked: 'urn:ofp:schema:grant-revoked:1',
} as const;

/** The headers of every message, as the AsyncAPI document describes them. */
export const CLOUDEVENTS_HEADERS: Readonly<Record<string, string>> = {
  ce_specversion: 'CloudEvents version: 1.0',
  ce_id: 'The event id: deduplicate on it (delivery is at least once); also the webhook-id of its deliveries',
  ce_source: '/ofp/<stream type>',
  ce_type: 'The event type (order.created, order.cancelled, grant.revoked, ...)',
  ce_time: 'When the change was recorded (RFC 3339)',
  ce_subject: "The record's stream id (<model>-<id>), also the message key",
  ce_sequence: "The record's version after the change (CloudEvents sequence extension)",
  ce_dataschema: 'The schema of the message body (a components.schemas $id)',
  ce_streamtype: 'The stream type: the model, or revocations',
  ce_orgid: 'The organization the record belongs to (absent for revocations)',
  ce_ofpposition: 'The position in the event store: <transaction id>.<position>',
  ce_ofpmetadata: 'The change’s metadata as JSON (actor, request id, traceparent)',
  ce_traceparent:
    'W3C Trace Context of the trace that made the change, when there is one (CloudEvents Distributed Tracing extension)',
  'content-type': 'application/json',
};

/**
 * CloudEvents 1.0 in Kafka binary mode (CloudEvents Kafka protocol binding §3.2): attributes travel
 * as `ce_`-prefixed headers, the event data is the message value, and the key is the stream id so
 * that one record's events stay in one partition, in order.
 *
 * Extension attributes (lower-case alphanumerics, CloudEvents §3.1.1):
 *   sequence     the stream version (the CloudEvents "sequence" extension; webhooks' `sequence`)
 *   streamtype   the stream's category (one topic each)
 *   orgid        the organization the record belongs to
 *   ofpposition  the global position `<transaction id>.<position>` in the event store
 *   ofpmetadata  the event's metadata as JSON
 *   traceparent  the W3C trace context of the change (the CloudEvents Distributed Tracing extension)
 * and `dataschema` names the body's schema ({@link DATA_SCHEMAS}).
 */
export function toKafkaMessage(event: StoredEvent): Message {
  const headers: IHeaders = {
    ce_specversion: '1.0',
    ce_dataschema:
      event.streamType === REVOCATIONS_STREAM_TYPE ? DATA_SCHEMAS.grantRevoked : DATA_SCHEMAS.recordChange,
    ce_id: event.eventId,
    ce_source: `/ofp/${event.streamType}`,
    ce_type: event.type,
    ce_time: event.recordedAt.toISOString(),
    ce_subject: event.streamId,
    ce_sequence: String(event.version),
    ce_streamtype: event.streamType,
    ce_ofpposition: `${event.position.transactionId}.${event.position.position}`,
    ce_ofpmetadata: JSON.stringify(event.metadata),
    'content-type': 'application/json',
  };
  if (event.orgId !== null) headers.ce_orgid = String(event.orgId);
  const traceparent = validTraceparent(event.metadata.traceparent);
  if (traceparent !== undefined) headers.ce_traceparent = traceparent;
  return { key: event.streamId, value: JSON.stringify(event.data), headers };
}

/** The inverse of toKafkaMessage; throws on a message that is not one of ours. */
export function fromKafkaMessage(message: KafkaMessage): StoredEvent {
  const header = (name: string): string | undefined => {
    const value = message.headers?.[name];
    const first = Array.isArray(value) ? value[0] : value;
    return first === undefined ? undefined : first.toString();
  };
  const required = (name: string): string => {
    const value = header(name);
    if (value === undefined) throw new Error(`Kafka message without ${name} header`);
    return value;
  };
  const [transactionId, position] = required('ce_ofpposition').split('.');
  const orgId = header('ce_orgid');
  return {
    eventId: required('ce_id'),
    streamId: required('ce_subject'),
    streamType: required('ce_streamtype'),
    version: Number(required('ce_sequence')),
    type: required('ce_type'),
    orgId: orgId === undefined ? null : Number(orgId),
    data: JSON.parse(message.value?.toString() ?? 'null') as unknown,
    metadata: JSON.parse(header('ce_ofpmetadata') ?? '{}') as Record<string, unknown>,
    recordedAt: new Date(required('ce_time')),
    position: { transactionId: transactionId ?? '0', position: Number(position) },
  };
}
