import { randomUUID } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { epochSeconds, type Scope } from '@ofp/auth-tokens';
import type { SigningKeys } from './signing-keys.js';
import { scopeString } from './oauth/scopes.js';
import { ACCESS_TOKEN_TTL_SECONDS } from './token-lifetime.js';

export interface AccessTokenSubject {
  clientId: string;
  organizationId: number;
  scopes: readonly Scope[];
  /** The grant the token is issued under; none for client credentials, which store nothing. */
  grantId?: string;
  /** The thumbprint of the DPoP key the token is bound to (RFC 9449 §6.1: `cnf.jkt`); none for a bearer token. */
  jkt?: string | undefined;
}

export interface IssuedAccessToken {
  token: string;
  tokenId: string;
  expiresAt: Date;
}

/**
 * Signs an access token in the RFC 9068 profile (API.md §7): header `typ: at+jwt`, RS256 with the
 * current signing key named in `kid`; `iss` the public base URL, `sub` and `client_id` the client, `aud`
 * the deployment's API resource (the public base URL as well: one audience for every service), `org`
 * its organization, `scope`, `jti`, `gid` the grant (when there is one), `iat`, `exp` = `iat` + 10800,
 * and for a DPoP-bound token `cnf: {jkt}` (RFC 9449 §6.1).
 */
export async function signAccessToken(
  keys: SigningKeys,
  issuer: string,
  subject: AccessTokenSubject,
  issuedAt: Date,
): Promise<IssuedAccessToken> {
  const { kid, privateKey } = await keys.signer();
  const tokenId = randomUUID();
  const iat = epochSeconds(issuedAt);
  const exp = iat + ACCESS_TOKEN_TTL_SECONDS;
  const token = jwt.sign(
    {
      iss: issuer,
      sub: subject.clientId,
      client_id: subject.clientId,
      aud: issuer,
      org: subject.organizationId,
      scope: scopeString(subject.scopes),
      ...(subject.grantId === undefined ? {} : { gid: subject.grantId }),
      ...(subject.jkt === undefined ? {} : { cnf: { jkt: subject.jkt } }),
      jti: tokenId,
      iat,
      exp,
    },
    privateKey,
    // RFC 9068 §2.1: `typ` tells an access token from any other JWT the same key might sign.
    { algorithm: 'RS256', keyid: kid, header: { alg: 'RS256', typ: 'at+jwt' } },
  );
  return { token, tokenId, expiresAt: new Date(exp * 1000) };
}
