import { CloudEvent, Kafka as CloudEventsKafka, type KafkaMessage as CloudEventsMessage } from 'cloudevents';
import type { StoredEvent } from '@ofp/event-store';
import { validTraceparent } from '@ofp/runtime';
import type { KafkaMessage, Message } from './kafka-javascript.js';

/**
 * The headers of every message, as the AsyncAPI document describes them: in the bus's terms (streams,
 * their types and organizations), whatever the services put in the event store.
 */
export const CLOUDEVENTS_HEADERS: Readonly<Record<string, string>> = {
  ce_specversion: 'CloudEvents version: 1.0',
  ce_id: 'The event id: deduplicate on it (delivery is at least once); also the webhook-id of its deliveries',
  ce_source: '/ofp/<stream type>',
  ce_type: 'The event type (order.created, order.cancelled, ...: one message of this document each)',
  ce_time: 'When the change was recorded (RFC 3339)',
  ce_subject: "The record's stream id (<model>-<id>), also the message key",
  ce_sequence: "The record's version after the change (CloudEvents sequence extension)",
  ce_dataschema: 'The schema of the message body (a components.schemas $id)',
  ce_streamtype: 'The stream type, which names the topic: a model, or a stream of no record',
  ce_orgid: "The organization the record belongs to (absent for a stream of no organization's)",
  ce_ofpposition: 'The position in the event store: <transaction id>.<position>',
  ce_ofpmetadata: 'The change’s metadata as JSON (actor, request id, traceparent)',
  ce_traceparent:
    'W3C Trace Context of the trace that made the change, when there is one (CloudEvents Distributed Tracing extension)',
  'content-type': 'application/json',
};

/**
 * CloudEvents 1.0 in Kafka binary mode (CloudEvents Kafka protocol binding §3.2), through the
 * `cloudevents` SDK's binding: attributes travel as `ce_`-prefixed headers, the event data is the
 * message value, and the key is the stream id so that one record's events stay in one partition, in
 * order.
 *
 * Extension attributes (lower-case alphanumerics, CloudEvents §3.1.1):
 *   sequence     the stream version (the CloudEvents "sequence" extension; webhooks' `sequence`)
 *   streamtype   the stream's category (one topic each)
 *   orgid        the organization the record belongs to
 *   ofpposition  the global position `<transaction id>.<position>` in the event store
 *   ofpmetadata  the event's metadata as JSON
 *   traceparent  the W3C trace context of the change (the CloudEvents Distributed Tracing extension)
 * and `dataschema` names the body's schema, which the caller knows from the stream type (the
 * AsyncAPI document lists them).
 *
 * Two things of the SDK's output are not sent, so that the messages are those consumers have always
 * read: `ce_datacontenttype`, which binary mode carries as `content-type` alone (§3.2.1), and the
 * attributes it lists without a value. The key is set here rather than from the `partitionkey`
 * extension, which would add a `ce_partitionkey` header.
 */
export function toKafkaMessage(event: StoredEvent, dataSchema: string): Message {
  const traceparent = validTraceparent(event.metadata.traceparent);
  const cloudEvent = new CloudEvent({
    specversion: '1.0',
    id: event.eventId,
    source: `/ofp/${event.streamType}`,
    type: event.type,
    time: event.recordedAt.toISOString(),
    subject: event.streamId,
    dataschema: dataSchema,
    datacontenttype: 'application/json',
    data: event.data,
    sequence: String(event.version),
    streamtype: event.streamType,
    ofpposition: `${event.position.transactionId}.${event.position.position}`,
    ofpmetadata: JSON.stringify(event.metadata),
    ...(event.orgId !== null ? { orgid: String(event.orgId) } : {}),
    ...(traceparent !== undefined ? { traceparent } : {}),
  });
  const binary = CloudEventsKafka.binary(cloudEvent);
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(binary.headers))
    if (value !== undefined && name !== 'ce_datacontenttype') headers[name] = String(value);
  return { key: event.streamId, value: JSON.stringify(binary.value), headers };
}

/** The inverse of toKafkaMessage, through the SDK's binding; throws on a message that is not one of ours. */
export function fromKafkaMessage(message: KafkaMessage): StoredEvent {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(message.headers ?? {})) {
    const first = Array.isArray(value) ? value[0] : value;
    if (first !== undefined) headers[name] = first.toString();
  }
  const received: CloudEventsMessage = {
    key: message.key?.toString() ?? '',
    value: message.value ?? Buffer.from('null'),
    headers,
    body: undefined,
  };
  const decoded = CloudEventsKafka.toEvent(received);
  if (Array.isArray(decoded)) throw new Error('Kafka message with a batch of CloudEvents');
  const attributes = decoded as unknown as Record<string, unknown>;
  const required = (name: string): string => {
    const value = attributes[name];
    if (typeof value !== 'string') throw new Error(`Kafka message without ce_${name} header`);
    return value;
  };
  const [transactionId, position] = required('ofpposition').split('.');
  const orgId = attributes.orgid;
  const metadata = attributes.ofpmetadata;
  return {
    eventId: required('id'),
    streamId: required('subject'),
    streamType: required('streamtype'),
    version: Number(required('sequence')),
    type: required('type'),
    orgId: typeof orgId === 'string' ? Number(orgId) : null,
    data: decoded.data === undefined ? null : decoded.data,
    metadata: JSON.parse(typeof metadata === 'string' ? metadata : '{}') as Record<string, unknown>,
    recordedAt: new Date(required('time')),
    position: { transactionId: transactionId ?? '0', position: Number(position) },
  };
}
