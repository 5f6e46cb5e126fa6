import { addressKey, FailedAuthenticationLimits } from './failed-authentication.js';

describe('addressKey', () => {
  it('counts an IPv4 address by itself', () => {
    expect(addressKey('203.0.113.7')).toBe('203.0.113.7');
  });

  it('counts an IPv6 address by its /64, however it is written', () => {
    expect(addressKey('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:2::/64');
    expect(addressKey('2001:0db8:0001:0002::9')).toBe('2001:db8:1:2::/64');
    expect(addressKey('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(addressKey('::1')).toBe('0:0:0:0::/64');
  });

  it('counts requests whose address is unknown together', () => {
    expect(addressKey(undefined)).toBe('unknown');
  });
});

describe('FailedAuthenticationLimits', () => {
  const now = 0;
  const limits = () =>
    new FailedAuthenticationLimits({ capacity: 2, refillPerSecond: 0.1 }, () => new Date(now));
  const refused = new Error('401');

  it('answers the refusal within the limits and a 429 beyond them', () => {
    const subject = limits();
    expect(subject.failed(refused, 'c1', '192.0.2.1')).toBe(refused);
    expect(subject.failed(refused, 'c1', '192.0.2.1')).toBe(refused);
    expect(subject.failed(refused, 'c1', '192.0.2.1')).toMatchObject({
      kind: 'RateLimited',
      headers: { 'Retry-After': '10' },
    });
  });

  it('stops an address over its limit before checking, except for a client familiar there', () => {
    const subject = limits();
    subject.succeeded('c1', '192.0.2.1');
    subject.failed(refused, 'c2', '192.0.2.1');
    subject.failed(refused, 'c3', '192.0.2.1');
    expect(() => subject.admit('c4', '192.0.2.1')).toThrow('RateLimited');
    expect(() => subject.admit(undefined, '192.0.2.1')).toThrow();
    expect(() => subject.admit('c1', '192.0.2.1')).not.toThrow();
    expect(() => subject.admit('c4', '192.0.2.2')).not.toThrow();
  });

  it('never stops a client_id over its limit before checking', () => {
    const subject = limits();
    subject.failed(refused, 'c1', '192.0.2.1');
    subject.failed(refused, 'c1', '192.0.2.2');
    expect(() => subject.admit('c1', '192.0.2.3')).not.toThrow();
    expect(subject.failed(refused, 'c1', '192.0.2.3')).toMatchObject({ kind: 'RateLimited' });
  });
});
