import { fieldError, recordStreamId } from '@ofp/contracts';
import { comparePositions, type EventStore, type GlobalPosition } from '@ofp/event-store';
import { eventPayload, publishedEventOf } from '@ofp/models';

/** How long the feed shows an event (API.md "Events feed": 30 days, as Stripe's `GET /v1/events`). */
export const FEED_RETENTION_DAYS = 30;

/** The feed's bounds (docs/events-feed.md). */
export const FEED_LIMITS = {
  defaultLimit: 50,
  maxLimit: 500,
  maxTypes: 20,
  /**
   * A page with a filter looks at no more than this many of the organization's events: a rare type
   * would otherwise read every other event first. The page then ends early, with `has_more` and a
   * cursor past what it looked at.
   */
  scanLimit: 10_000,
} as const;

/** How long a computed start of the retention window is used before it is looked up again. */
const WINDOW_REFRESH_MS = 60_000;

export interface FeedRequest {
  readonly orgId: number;
  /** The cursor the previous page answered (`next_cursor`); absent: from the oldest event kept. */
  readonly startingAfter?: string;
  readonly limit: number;
  /** Only these event types. */
  readonly types?: readonly string[];
  /** Only the events of one record: its model's name and its id. */
  readonly record?: { readonly model: string; readonly id: number };
}

export interface FeedPage {
  /** Each event's published body, exactly as a webhook delivery carries it. */
  readonly payloads: readonly string[];
  /** Whether more events may follow now: ask again at once with `nextCursor`. */
  readonly hasMore: boolean;
  /** Where the next page starts: pass it as `starting_after`. */
  readonly nextCursor: string;
}

/**
 * The organization's events feed (`GET /v2/events`): its events in the event store's global order,
 * rendered as webhook deliveries render them, behind the same visibility rule as every reader of the
 * store, so that a client resuming from a cursor misses no event that committed late and gets none twice.
 */
export class EventFeed {
  private window: { readonly computedAt: number; readonly start: GlobalPosition } | undefined;

  constructor(
    private readonly store: EventStore,
    private readonly clock: () => Date,
    /** {@link FEED_LIMITS}' `scanLimit` (smaller in tests, to reach the bound). */
    private readonly scanLimit: number = FEED_LIMITS.scanLimit,
  ) {}

  async page(request: FeedRequest): Promise<FeedPage> {
    const windowStart = await this.windowStart();
    let after: GlobalPosition;
    if (request.startingAfter === undefined) {
      after = justBefore(windowStart);
    } else {
      after = decodeCursor(request.startingAfter);
      if (comparePositions(after, windowStart) < 0) {
        const { events } = await this.store.readOrganization(request.orgId, after, { limit: 1 });
        const next = events[0];
        if (next && comparePositions(next.position, windowStart) < 0)
          throw fieldError(
            'Gone',
            'starting_after',
            `is older than the ${FEED_RETENTION_DAYS} days the feed keeps, and events were dropped since: start again without it, and catch up by searching the records updated since`,
          );
      }
    }
    const filtered = request.types !== undefined || request.record !== undefined;
    const { events, scanEnd } = await this.store.readOrganization(request.orgId, after, {
      // One more than asked, to know whether more follow.
      limit: request.limit + 1,
      ...(request.types === undefined ? {} : { types: request.types }),
      ...(request.record === undefined
        ? {}
        : { streamId: recordStreamId(request.record.model, request.record.id) }),
      // One record's events come from its own index: nothing to skip, nothing to bound.
      ...(filtered && request.record === undefined ? { scanLimit: this.scanLimit } : {}),
    });
    const page = events.slice(0, request.limit);
    // A read that stopped at its scan bound goes on from there: more may match beyond it.
    const next = scanEnd ?? page[page.length - 1]?.position ?? after;
    return {
      payloads: page.map((event) => eventPayload(publishedEventOf(event))),
      hasMore: events.length > request.limit || scanEnd !== undefined,
      nextCursor: encodeCursor(next),
    };
  }

  /**
   * The oldest event kept, or with none kept what every later event follows; looked up again at most
   * once a minute (the window moves slowly).
   */
  private async windowStart(): Promise<GlobalPosition> {
    const now = this.clock().getTime();
    if (this.window === undefined || now - this.window.computedAt > WINDOW_REFRESH_MS) {
      // The horizon first: an event that was not visible then belongs to a transaction it precedes.
      const horizon = await this.store.visibleHorizon();
      const first = await this.store.firstPositionSince(new Date(now - FEED_RETENTION_DAYS * 86_400_000));
      this.window = { computedAt: now, start: first ?? horizon };
    }
    return this.window.start;
  }
}

/** The position right before `position`: its transaction's events all follow it. */
function justBefore(position: GlobalPosition): GlobalPosition {
  return {
    transactionId: (BigInt(position.transactionId) - 1n).toString(),
    position: Number.MAX_SAFE_INTEGER,
  };
}

/** The opaque cursor of a position: base64url of `<transaction id>.<position>`. */
export function encodeCursor(position: GlobalPosition): string {
  return Buffer.from(`${position.transactionId}.${position.position}`).toString('base64url');
}

/** The position of a cursor the feed answered; anything else is a 400 on `starting_after`. */
export function decodeCursor(cursor: string): GlobalPosition {
  const match = /^(\d{1,20})\.(\d{1,18})$/.exec(Buffer.from(cursor, 'base64url').toString('latin1'));
  if (!match || encodeCursor({ transactionId: match[1]!, position: Number(match[2]) }) !== cursor)
    throw fieldError('Invalid', 'starting_after', 'is not a cursor this feed answered (next_cursor)');
  return { transactionId: match[1]!, position: Number(match[2]) };
}
