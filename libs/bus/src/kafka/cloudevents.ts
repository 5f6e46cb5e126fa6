import type { IHeaders, KafkaMessage, Message } from 'kafkajs';
import type { StoredEvent } from '@ofp/event-store';

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
 */
export function toKafkaMessage(event: StoredEvent): Message {
  const headers: IHeaders = {
    ce_specversion: '1.0',
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
