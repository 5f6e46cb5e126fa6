import { Webhook } from 'standardwebhooks';
import { generateSecret, sign, signatureHeaders } from './signing.js';

// The Standard Webhooks specification's published test vector (spec "Signature scheme" examples).
const VECTOR = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};

/** Verifies as of `at` (the library checks the timestamp against its own clock). */
function verifyAt(secret: string, body: string, headers: Record<string, string>, at: Date): unknown {
  const now = Date.now;
  Date.now = () => at.getTime();
  try {
    return new Webhook(secret).verify(body, headers);
  } finally {
    Date.now = now;
  }
}

describe('Standard Webhooks signing', () => {
  it('reproduces the specification test vector', () => {
    expect(sign(VECTOR.secret, VECTOR.id, VECTOR.timestamp, VECTOR.body)).toBe(VECTOR.signature);
  });

  it('signs headers that the standardwebhooks library verifies', () => {
    const at = new Date('2026-11-21T07:30:00.000Z');
    const secret = generateSecret();
    const body = JSON.stringify({ id: 'e-1', type: 'person.created', data: { id: 1 } });
    const headers = signatureHeaders([secret], 'e-1', at, body);
    expect(headers['webhook-timestamp']).toBe(String(at.getTime() / 1000));
    expect(verifyAt(secret, body, headers, at)).toEqual(JSON.parse(body));
  });

  it('during a rotation carries both signatures, so either secret verifies', () => {
    const at = new Date();
    const [current, previous] = [generateSecret(), generateSecret()];
    const headers = signatureHeaders([current, previous], 'e-2', at, '{}');
    expect(headers['webhook-signature'].split(' ')).toHaveLength(2);
    expect(() => verifyAt(current, '{}', headers, at)).not.toThrow();
    expect(() => verifyAt(previous, '{}', headers, at)).not.toThrow();
    expect(() => verifyAt(generateSecret(), '{}', headers, at)).toThrow(/No matching signature/);
  });

  it('makes secrets of whsec_ and 32 random bytes', () => {
    const secret = generateSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
    expect(generateSecret()).not.toBe(secret);
  });
});
