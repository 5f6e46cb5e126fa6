import { JWT_BEARER_ASSERTION, presentedCredentials } from './client-auth.js';
import { OAuthError } from './errors.js';

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

describe('presentedCredentials', () => {
  it('reads HTTP Basic credentials, form-decoding both parts (RFC 6749 §2.3.1)', () => {
    expect(presentedCredentials(basic('my%20client', 'a%3Ab+c'), new Map())).toEqual({
      method: 'client_secret_basic',
      clientId: 'my client',
      clientSecret: 'a:b c',
    });
  });

  it('reads credentials from the body', () => {
    const form = new Map([
      ['client_id', 'c1'],
      ['client_secret', 's1'],
    ]);
    expect(presentedCredentials(undefined, form)).toEqual({
      method: 'client_secret_post',
      clientId: 'c1',
      clientSecret: 's1',
    });
  });

  it('refuses two methods in one request', () => {
    const form = new Map([['client_secret', 's1']]);
    expect(() => presentedCredentials(basic('c1', 's1'), form)).toThrow(
      'invalid_request: Use one client authentication method, not two',
    );
  });

  it('answers malformed Basic credentials with invalid_client and a Basic challenge', () => {
    let error: unknown;
    try {
      presentedCredentials(`Basic ${Buffer.from('no-colon').toString('base64')}`, new Map());
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(OAuthError);
    expect((error as OAuthError).status).toBe(401);
    expect((error as OAuthError).headers['WWW-Authenticate']).toMatch(/^Basic /);
  });

  it('finds no credentials when only a client_id is sent', () => {
    expect(presentedCredentials(undefined, new Map([['client_id', 'c1']]))).toEqual({ method: 'none' });
  });

  describe('client assertions (RFC 7523 §2.2)', () => {
    const jwt = (claims: object) =>
      `${Buffer.from('{"alg":"ES256"}').toString('base64url')}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}.sig`;
    const assertionForm = (extra: [string, string][] = []) =>
      new Map([
        ['client_assertion_type', JWT_BEARER_ASSERTION],
        ['client_assertion', jwt({ sub: 'c1', iss: 'c1' })],
        ...extra,
      ]);
    const refusal = (authorization: string | undefined, form: Map<string, string>) => {
      try {
        presentedCredentials(authorization, form);
      } catch (error) {
        return [(error as OAuthError).code, (error as OAuthError).description];
      }
      return undefined;
    };

    it('names the client the assertion names in sub', () => {
      expect(presentedCredentials(undefined, assertionForm([['client_id', 'c1']]))).toEqual({
        method: 'private_key_jwt',
        clientId: 'c1',
        assertion: jwt({ sub: 'c1', iss: 'c1' }),
      });
    });

    it('refuses a second method, another assertion type, another client_id, or no client', () => {
      expect(refusal(basic('c1', 's1'), assertionForm())).toEqual([
        'invalid_request',
        'Use one client authentication method, not two',
      ]);
      expect(refusal(undefined, assertionForm([['client_secret', 's1']]))?.[0]).toBe('invalid_request');
      expect(refusal(undefined, assertionForm([['client_assertion_type', 'urn:other']]))?.[0]).toBe(
        'invalid_request',
      );
      expect(refusal(undefined, assertionForm([['client_id', 'c2']]))).toEqual([
        'invalid_request',
        'client_id differs from the client assertion',
      ]);
      expect(refusal(undefined, assertionForm([['client_assertion', jwt({ iss: 'c1' })]]))).toEqual([
        'invalid_client',
        'The client assertion names no client (sub)',
      ]);
    });
  });
});
