import type { Revocation, RevocationDenyList } from './revocations.js';

/** The stream type of the auth service's revocation announcements (`grant.revoked`), one stream each. */
export const REVOCATIONS_STREAM_TYPE = 'revocations';
/** The event type of a revocation announcement. */
export const GRANT_REVOKED = 'grant.revoked';

/**
 * The data of a `grant.revoked` event: the tokens of a grant (`grant_id`; with `token_id`, only that one
 * of them), one token of no grant (`token_id` alone: a client-credentials token), or every token of a
 * client (`client_id`: a disabled client). Announcements written before `client_id` existed lack it.
 */
export interface RevocationAnnouncement {
  readonly grant_id: string | null;
  readonly token_id: string | null;
  readonly client_id?: string | null;
  readonly expires_at: string;
}

export function announcementOf(revocation: Revocation): RevocationAnnouncement {
  return {
    grant_id: 'grantId' in revocation ? revocation.grantId : null,
    token_id: 'tokenId' in revocation ? (revocation.tokenId ?? null) : null,
    client_id: 'clientId' in revocation ? revocation.clientId : null,
    expires_at: revocation.expiresAt.toISOString(),
  };
}

/** The revocation an announcement makes, or undefined for one that names nothing. */
export function revocationOf(announced: RevocationAnnouncement): Revocation | undefined {
  const expiresAt = new Date(announced.expires_at);
  if (announced.client_id != null) return { clientId: announced.client_id, expiresAt };
  if (announced.grant_id != null)
    return {
      grantId: announced.grant_id,
      ...(announced.token_id === null ? {} : { tokenId: announced.token_id }),
      expiresAt,
    };
  if (announced.token_id != null) return { tokenId: announced.token_id, expiresAt };
  return undefined;
}

/** What {@link revocationSubscription} reads of an event: the bus's events have more. */
export interface AnnouncedEvent {
  readonly type: string;
  readonly data: unknown;
}

/**
 * The bus subscription that keeps `denyList` fed with the revocations the auth service announces
 * (API.md §7): `grant.revoked` events, appended to the event store in the transaction that revokes
 * and carried by the bus (Kafka in the distributed shape, the Postgres log standalone). Transient:
 * every process reads every announcement from the beginning, so the announcements still in force
 * come first. The composition root runs it as a bus consumer module (`consumerModule` of
 * `@ofp/bus`), ready once subscribed; the backlog follows within moments. This package knows the
 * announcements, not the bus.
 */
export function revocationSubscription(denyList: RevocationDenyList, group: string) {
  return {
    group,
    streamTypes: [REVOCATIONS_STREAM_TYPE],
    transient: true,
    handle: (events: readonly AnnouncedEvent[]): Promise<void> => {
      for (const event of events) {
        if (event.type !== GRANT_REVOKED) continue;
        const revocation = revocationOf(event.data as RevocationAnnouncement);
        if (revocation !== undefined) denyList.add(revocation);
      }
      return Promise.resolve();
    },
  };
}
