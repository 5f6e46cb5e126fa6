import { BlockedTargetError } from './address-guard.js';
import { classifyFailure } from './http-sender.js';

const coded = (code: string, message = code): Error => Object.assign(new Error(message), { code });

describe('classifyFailure', () => {
  it.each([
    [coded('ECONNREFUSED', 'connect ECONNREFUSED 127.0.0.1:9'), 'refused'],
    [new AggregateError([coded('ECONNREFUSED'), coded('ECONNREFUSED')], 'all addresses failed'), 'refused'],
    [Object.assign(new TypeError('fetch failed'), { cause: coded('ECONNREFUSED') }), 'refused'],
    [coded('UND_ERR_CONNECT_TIMEOUT', 'Connect Timeout Error'), 'timeout'],
    [coded('UND_ERR_HEADERS_TIMEOUT'), 'timeout'],
    [new DOMException('The operation was aborted due to timeout', 'TimeoutError'), 'timeout'],
    [coded('ENOTFOUND', 'getaddrinfo ENOTFOUND hooks.invalid'), 'dns'],
    [coded('EAI_AGAIN'), 'dns'],
    [coded('CERT_HAS_EXPIRED', 'certificate has expired'), 'tls'],
    [coded('DEPTH_ZERO_SELF_SIGNED_CERT'), 'tls'],
    [coded('ERR_TLS_CERT_ALTNAME_INVALID'), 'tls'],
    [
      Object.assign(coded('UND_ERR_SOCKET', 'other side closed'), { cause: new BlockedTargetError('x') }),
      'blocked',
    ],
    [coded('ECONNRESET', 'read ECONNRESET'), 'network'],
    ['a string', 'network'],
  ])('classifies %s as %s', (error, kind) => {
    expect(classifyFailure(error).kind).toBe(kind);
  });

  it('keeps the message of the error that decided the kind', () => {
    const error = Object.assign(new Error('fetch failed'), {
      cause: coded('ECONNREFUSED', 'connect ECONNREFUSED 10.0.0.1:443'),
    });
    expect(classifyFailure(error)).toEqual({ kind: 'refused', message: 'connect ECONNREFUSED 10.0.0.1:443' });
  });
});
