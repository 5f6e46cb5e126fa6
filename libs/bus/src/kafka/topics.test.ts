import kafkajs from 'kafkajs';
import { onceTopicsAreKnown } from './topics.js';

/** The error kafkajs throws when the broker asked does not know the topic (yet): code 3. */
function unknownTopic(): Error {
  // As kafkajs makes it from the protocol's error table (its typings take the message alone).
  const protocolError = Object.assign(new Error('This server does not host this topic-partition'), {
    type: 'UNKNOWN_TOPIC_OR_PARTITION',
    code: 3,
    retriable: true,
  });
  // The errors are spread into kafkajs's CommonJS exports, which ESM finds no named export of.
  return new kafkajs.KafkaJSProtocolError(protocolError);
}

describe('onceTopicsAreKnown', () => {
  it('tries again while a broker does not know the topic yet, and resolves with the answer', async () => {
    let attempts = 0;
    const answer = await onceTopicsAreKnown(() => {
      attempts++;
      if (attempts < 3) return Promise.reject(unknownTopic());
      return Promise.resolve('subscribed');
    });
    expect({ answer, attempts }).toEqual({ answer: 'subscribed', attempts: 3 });
  });

  it('lets any other error through at once', async () => {
    let attempts = 0;
    const failing = onceTopicsAreKnown(() => {
      attempts++;
      return Promise.reject(new Error('SASL authentication failed'));
    });
    await expect(failing).rejects.toThrow('SASL authentication failed');
    expect(attempts).toBe(1);
  });
});
