import { createHash, timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { bearerChallenge } from '@ofp/auth-tokens';
import { baseError } from '@ofp/contracts';

const sha256 = (value: string) => createHash('sha256').update(value, 'utf8').digest();

/**
 * Requires `Authorization: Bearer <ADMIN_TOKEN>` (API.md §10). The comparison runs on digests of equal
 * length with timingSafeEqual, so its duration tells nothing about how much of a guess was right.
 */
export function requireAdminToken(adminToken: string): RequestHandler {
  const expected = sha256(adminToken);
  return (req, _res, next) => {
    const header = req.get('authorization');
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
    next();
  };
}
