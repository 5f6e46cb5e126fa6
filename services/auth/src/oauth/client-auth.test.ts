import { presentedCredentials } from './client-auth.js';
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
});
