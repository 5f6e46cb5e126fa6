import type { StoredEvent } from '@ofp/event-store';
import { fromKafkaMessage, toKafkaMessage } from './cloudevents.js';
import type { KafkaMessage, Message } from './kafka-javascript.js';

const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

const personCreated: StoredEvent = {
  eventId: '0b7e3c5a-7f0e-4a51-9c1e-2d4f7a1b9e10',
  streamId: 'people-42',
  streamType: 'people',
  version: 3,
  type: 'person.updated',
  orgId: 7,
  data: { id: 42, last_name: 'Hopper', tags: ['navy', 'cobol'], nested: { a: null } },
  metadata: { actor: 'client:abc', requestId: 'req-1', traceparent: TRACEPARENT },
  recordedAt: new Date('2026-11-27T03:04:05.678Z'),
  position: { transactionId: '981', position: 1234 },
};

const revocation: StoredEvent = {
  ...personCreated,
  streamId: 'revocations-5',
  streamType: 'revocations',
  version: 1,
  type: 'grant.revoked',
  orgId: null,
  data: { grant_id: 'g', token_id: null, expires_at: '2026-11-27T04:00:00.000Z' },
  metadata: {},
};

/** The message as the consumer's client hands it: every header and the value as bytes. */
function received(message: Message): KafkaMessage {
  const headers = Object.fromEntries(
    Object.entries(message.headers ?? {}).map(([name, value]) => [name, Buffer.from(String(value))]),
  );
  return {
    key: Buffer.from(String(message.key)),
    value: Buffer.from(String(message.value)),
    headers,
    timestamp: '0',
    attributes: 0,
    offset: '0',
  };
}

describe('the CloudEvents Kafka binding', () => {
  // The headers, key and value the hand-written binding sent before the SDK's (byte for byte), so
  // that consumers of the topics outside this project see no change.
  it('sends the headers, key and value it always sent', () => {
    expect(toKafkaMessage(personCreated, 'urn:ofp:schema:record-change:1')).toEqual({
      key: 'people-42',
      value: '{"id":42,"last_name":"Hopper","tags":["navy","cobol"],"nested":{"a":null}}',
      headers: {
        ce_specversion: '1.0',
        ce_dataschema: 'urn:ofp:schema:record-change:1',
        ce_id: '0b7e3c5a-7f0e-4a51-9c1e-2d4f7a1b9e10',
        ce_source: '/ofp/people',
        ce_type: 'person.updated',
        ce_time: '2026-11-27T03:04:05.678Z',
        ce_subject: 'people-42',
        ce_sequence: '3',
        ce_streamtype: 'people',
        ce_ofpposition: '981.1234',
        ce_ofpmetadata: `{"actor":"client:abc","requestId":"req-1","traceparent":"${TRACEPARENT}"}`,
        'content-type': 'application/json',
        ce_orgid: '7',
        ce_traceparent: TRACEPARENT,
      },
    });
    expect(toKafkaMessage(revocation, 'urn:ofp:schema:grant-revoked:1').headers).toEqual({
      ce_specversion: '1.0',
      ce_dataschema: 'urn:ofp:schema:grant-revoked:1',
      ce_id: '0b7e3c5a-7f0e-4a51-9c1e-2d4f7a1b9e10',
      ce_source: '/ofp/revocations',
      ce_type: 'grant.revoked',
      ce_time: '2026-11-27T03:04:05.678Z',
      ce_subject: 'revocations-5',
      ce_sequence: '1',
      ce_streamtype: 'revocations',
      ce_ofpposition: '981.1234',
      ce_ofpmetadata: '{}',
      'content-type': 'application/json',
    });
  });

  it('reads back the event it sent', () => {
    for (const event of [personCreated, revocation])
      expect(fromKafkaMessage(received(toKafkaMessage(event, 'urn:ofp:schema:x:1')))).toEqual(event);
  });

  it('refuses a message that is not one of ours, naming what it lacks', () => {
    const message = received(toKafkaMessage(personCreated, 'urn:ofp:schema:x:1'));
    delete message.headers!.ce_ofpposition;
    expect(() => fromKafkaMessage(message)).toThrow('Kafka message without ce_ofpposition header');
  });
});
