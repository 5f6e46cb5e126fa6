import { consumerModule, type Bus } from '@ofp/bus';
import type { Module } from '@ofp/runtime';
import type { Revocation, RevocationDenyList } from './revocations.js';

/** The stream type of revocation announcements: one stream per announcement, in the event store. */
export const REVOCATIONS_STREAM_TYPE = 'revocations';
/** The event type of a revocation announcement. */
export const GRANT_REVOKED = 'grant.revoked';

/** The data of a `grant.revoked` event. `token_id` null: every token of the grant. */
export interface RevocationAnnouncement {
  readonly grant_id: string;
  readonly token_id: string | null;
  readonly expires_at: string;
}

export function announcementOf(revocation: Revocation): RevocationAnnouncement {
  return {
    grant_id: revocation.grantId,
    token_id: revocation.tokenId ?? null,
    expires_at: revocation.expiresAt.toISOString(),
  };
}

/**
 * Keeps `denyList` fed with the revocations the auth service announces (API.md §7): `grant.revoked`
 * events, appended to the event store in the transaction that revokes and carried by the bus (Kafka
 * in the distributed shape, the Postgres log standalone). Every process reads every announcement
 * from the beginning (a transient subscription), so the announcements still in force come first. The
 * module is ready once subscribed; the backlog follows within moments.
 */
export function revocationsModule(bus: Bus, denyList: RevocationDenyList, group: string): Module {
  return consumerModule(bus, {
    name: 'revocations',
    subscriptions: [
      {
        group,
        streamTypes: [REVOCATIONS_STREAM_TYPE],
        transient: true,
        handle: (events) => {
          for (const event of events) {
            if (event.type !== GRANT_REVOKED) continue;
            const announced = event.data as RevocationAnnouncement;
            denyList.add({
              grantId: announced.grant_id,
              ...(announced.token_id === null ? {} : { tokenId: announced.token_id }),
              expiresAt: new Date(announced.expires_at),
            });
          }
          return Promise.resolve();
        },
      },
    ],
  });
}
