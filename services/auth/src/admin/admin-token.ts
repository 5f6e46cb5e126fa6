import { createHash, timingSafeEqual } from 'node:crypto';
import { baseError } from '@ofp/contracts';
import { bearerChallenge, type Access } from '@ofp/http-api';

const sha256 = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/**
 * Requires `Authorization: Bearer <ADMIN_TOKEN>` (API.md §10). The comparison runs on digests of equal
 * length with timingSafeEqual, so its duration tells nothing about how much of a guess was right.
 */
export function adminAccess(adminToken: string): Access<undefined> {
  const expected = sha256(adminToken);
  return {
    kind: 'admin',
    authenticate(request) {
      const header = request.headers.authorization;
      const presented = header === undefined ? undefined : /^Bearer +(\S+)$/i.exec(header)?.[1];
      if (presented === undefined) {
        throw baseError('Unauthenticated', 'The admin token is required', {
          'WWW-Authenticate': bearerChallenge(),
        });
      }
      if (!timingSafeEqual(sha256(presented), expected)) {
        const description = 'The admin token is not valid';
        throw baseError('Unauthenticated', description, {
          'WWW-Authenticate': bearerChallenge({ code: 'invalid_token', description }),
        });
      }
      return Promise.resolve({ principal: undefined, scopes: [] });
    },
  };
}
