import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { DeliverySigner, generateSecret } from './signing.js';

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

/** The signature as the specification defines it, computed with node:crypto. */
function specSignature(secret: string, id: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`;
}

describe('Standard Webhooks signing', () => {
  const signer = new DeliverySigner();

  it('reproduces the specification test vector', () => {
    const headers = signer.headers(
      [VECTOR.secret],
      VECTOR.id,
      new Date(VECTOR.timestamp * 1000),
      VECTOR.body,
    );
    expect(headers).toEqual({
      'webhook-id': VECTOR.id,
      'webhook-timestamp': String(VECTOR.timestamp),
      'webhook-signature': VECTOR.signature,
    });
  });

  it('signs byte for byte as the specification computes it, whatever the body and the millisecond', () => {
    for (let n = 0; n < 200; n++) {
      const secret = generateSecret();
      const id = randomUUID();
      const at = new Date(1_800_000_000_000 + Math.floor(Math.random() * 1e9));
      // Any text: multi-byte characters, escapes, the empty body.
      const body =
        n === 0 ? '' : JSON.stringify({ n, text: `été ✓ 🚚 ${randomBytes(n).toString('latin1')}` });
      expect(signer.headers([secret], id, at, body)['webhook-signature']).toBe(
        specSignature(secret, id, Math.floor(at.getTime() / 1000), body),
      );
    }
  });

  it('signs headers that the standardwebhooks library verifies', () => {
    const at = new Date('2026-11-21T07:30:00.000Z');
    const secret = generateSecret();
    const body = JSON.stringify({ id: 'e-1', type: 'person.created', data: { id: 1 } });
    const headers = signer.headers([secret], 'e-1', at, body);
    expect(headers['webhook-timestamp']).toBe(String(at.getTime() / 1000));
    expect(verifyAt(secret, body, headers, at)).toEqual(JSON.parse(body));
  });

  it('during a rotation carries both signatures, so either secret verifies', () => {
    const at = new Date();
    const [current, previous] = [generateSecret(), generateSecret()];
    const headers = signer.headers([current, previous], 'e-2', at, '{}');
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
