import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { EventStore, migrateEventStore } from '@ofp/event-store';
import { createTestDatabase, testLogger, type TestDatabase } from '@ofp/testing';
import { EventFeed, encodeCursor, type FeedPage, type FeedRequest } from './event-feed.js';

// The events feed against a real Postgres, under appends whose transactions overlap and commit in
// any order (sequence order is not commit order: a transaction that appended first may commit last).
// A poller that reads a page at a time while they run, resuming from each page's cursor, must get
// every committed event of its organization exactly once, none of a rolled-back transaction, one
// record's events in version order, an event committed before another began ahead of it, and from any
// cursor it was given, exactly the rest.

const ORGS = 2;
const TYPES = ['thing.created', 'thing.updated', 'thing.flagged'];

type Step =
  | { readonly kind: 'append'; readonly org: number; readonly stream: number; readonly type: number }
  | { readonly kind: 'commit'; readonly which: number }
  | { readonly kind: 'abort'; readonly which: number }
  | { readonly kind: 'poll'; readonly org: number; readonly limit: number; readonly filtered: boolean };

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('append' as const),
      org: fc.nat(ORGS - 1),
      stream: fc.nat(3),
      type: fc.nat(TYPES.length - 1),
    }),
  },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('commit' as const), which: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('abort' as const), which: fc.nat() }) },
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('poll' as const),
      org: fc.nat(ORGS - 1),
      limit: fc.integer({ min: 1, max: 3 }),
      filtered: fc.boolean(),
    }),
  },
);

/** An append whose transaction stays open (its events inserted, so its transaction id taken) until told. */
interface OpenAppend {
  readonly events: readonly string[];
  readonly streamId: string;
  readonly finish: (commit: boolean) => Promise<void>;
}

interface Poller {
  cursor?: string;
  readonly seen: string[];
  /** Every cursor handed out, with how many events had been seen when it was. */
  readonly cursors: { readonly cursor: string; readonly seenBefore: number }[];
}

describe('GET /v2/events: the feed under overlapping appends', () => {
  let db: TestDatabase;
  let store: EventStore;
  let run = 0;

  beforeAll(async () => {
    db = await createTestDatabase();
    await migrateEventStore(db.pool, testLogger());
    store = new EventStore(db.pool, { outbox: false });
  });
  afterAll(() => db.drop());

  it('gives each organization its committed events exactly once, in commit order, resumable from any cursor', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 5, maxLength: 40 }), async (steps) => {
        run += 1;
        // A small scan bound, so that filtered pages end at it as a rare type's would.
        const feed = new EventFeed(store, () => new Date(), 2);
        const orgId = (org: number) => run * 10 + org;
        const open: OpenAppend[] = [];
        const versions = new Map<string, number>();
        const committed = new Map<number, string[]>();
        /** Event ids whose transaction had committed when each event's own append began. */
        const before = new Map<string, ReadonlySet<string>>();
        const done = new Set<string>();
        const streamOf = new Map<string, { streamId: string; version: number }>();
        const typeOf = new Map<string, string>();
        const pollers = new Map<string, Poller>();
        const poller = (org: number, filtered: boolean) => {
          const key = `${org}:${filtered}`;
          if (!pollers.has(key)) pollers.set(key, { seen: [], cursors: [] });
          return pollers.get(key)!;
        };
        const request = (org: number, filtered: boolean, limit: number, cursor?: string): FeedRequest => ({
          orgId: orgId(org),
          limit,
          ...(filtered ? { types: [TYPES[2]!] } : {}),
          ...(cursor === undefined ? {} : { startingAfter: cursor }),
        });
        const poll = async (org: number, filtered: boolean, limit: number) => {
          const reader = poller(org, filtered);
          const page = await feed.page(request(org, filtered, limit, reader.cursor));
          reader.seen.push(...idsOf(page));
          reader.cursor = page.nextCursor;
          reader.cursors.push({ cursor: page.nextCursor, seenBefore: reader.seen.length });
          return page;
        };

        try {
          for (const s of steps) {
            if (s.kind === 'append') {
              const streamId = `thing-${run}-${s.org}-${s.stream}`;
              // One open append per stream: a second would wait on the first's row lock.
              if (open.some((append) => append.streamId === streamId) || open.length >= 5) continue;
              const version = versions.get(streamId) ?? 0;
              const ids = [randomUUID(), randomUUID()].slice(0, 1 + (s.type % 2));
              const already = new Set(done);
              for (const id of ids) before.set(id, already);
              ids.forEach((id, i) => {
                streamOf.set(id, { streamId, version: version + i + 1 });
                typeOf.set(id, TYPES[(s.type + i) % TYPES.length]!);
              });
              let inserted!: () => void;
              const insertedNow = new Promise<void>((resolve) => (inserted = resolve));
              let decide!: (commit: boolean) => void;
              const decided = new Promise<boolean>((resolve) => (decide = resolve));
              const appended = store.appendToStreams(
                [
                  {
                    streamId,
                    streamType: 'thing',
                    expectedVersion: version,
                    orgId: orgId(s.org),
                    events: ids.map((eventId, i) => ({
                      eventId,
                      type: typeOf.get(eventId)!,
                      data: {
                        record: { id: s.stream, version: version + i + 1 },
                        previous: {},
                        deleted: false,
                      },
                    })),
                  },
                ],
                async () => {
                  inserted();
                  if (!(await decided)) throw new Error('rolled back on purpose');
                },
              );
              await insertedNow;
              open.push({
                events: ids,
                streamId,
                finish: async (commit) => {
                  decide(commit);
                  if (commit) {
                    await appended;
                    versions.set(streamId, version + ids.length);
                    committed.set(s.org, [...(committed.get(s.org) ?? []), ...ids]);
                    for (const id of ids) done.add(id);
                  } else {
                    await expect(appended).rejects.toThrow('rolled back on purpose');
                  }
                },
              });
            } else if (s.kind === 'commit' || s.kind === 'abort') {
              if (open.length === 0) continue;
              const [append] = open.splice(s.which % open.length, 1);
              await append!.finish(s.kind === 'commit');
            } else {
              await poll(s.org, s.filtered, s.limit);
            }
          }
        } finally {
          for (const append of open.splice(0)) await append.finish(true);
        }
        // Then each poller reads on until nothing more comes.
        for (let org = 0; org < ORGS; org++) {
          for (const filtered of [false, true]) {
            for (;;) {
              const page = await poll(org, filtered, 3);
              if (!page.hasMore && page.payloads.length === 0) break;
            }
          }
        }

        for (let org = 0; org < ORGS; org++) {
          const all = poller(org, false).seen;
          // Exactly once each: every committed event of the organization, nothing else.
          expect([...all].sort()).toEqual([...(committed.get(org) ?? [])].sort());
          expect(new Set(all).size).toBe(all.length);
          // One record's events in version order; an event committed before another's append began first.
          const at = new Map(all.map((id, index) => [id, index]));
          for (const [index, id] of all.entries()) {
            const { streamId, version } = streamOf.get(id)!;
            for (const earlier of all.slice(0, index)) {
              const other = streamOf.get(earlier)!;
              if (other.streamId === streamId) expect(other.version).toBeLessThan(version);
            }
            for (const finished of before.get(id)!) {
              if (at.has(finished)) expect(at.get(finished)).toBeLessThan(index);
            }
          }
          // The filtered feed: the same order, of that type only, though its pages ended at the scan bound.
          expect(poller(org, true).seen).toEqual(all.filter((id) => typeOf.get(id) === TYPES[2]));
          // From any cursor it handed out, the feed gives exactly what followed.
          for (const filtered of [false, true]) {
            const reader = poller(org, filtered);
            for (const { cursor, seenBefore } of reader.cursors) {
              const rest: string[] = [];
              let from = cursor;
              for (;;) {
                const page = await feed.page(request(org, filtered, 500, from));
                rest.push(...idsOf(page));
                from = page.nextCursor;
                if (!page.hasMore) break;
              }
              expect(rest).toEqual(reader.seen.slice(seenBefore));
            }
          }
        }
      }),
      { numRuns: 40 },
    );
  }, 300_000);

  it('keeps 30 days: an older cursor with events dropped since is a 410, a fresh start begins at the oldest kept', async () => {
    const orgId = 9_000;
    const append = (streamId: string) =>
      store.append({
        streamId,
        streamType: 'thing',
        expectedVersion: 0,
        orgId,
        events: [
          {
            eventId: randomUUID(),
            type: TYPES[0]!,
            data: { record: { id: 1, version: 1 }, previous: {}, deleted: false },
          },
        ],
      });
    const today = new Feed(store);
    const start = await today.page({ orgId, limit: 10 });
    await append('old-1');
    const afterFirst = await today.page({ orgId, limit: 10, startingAfter: start.nextCursor });
    expect(afterFirst.payloads).toHaveLength(1);
    await append('old-2');

    // 31 days on, neither event is kept.
    const later = new Feed(store, 31);
    const fresh = await later.page({ orgId, limit: 10 });
    expect(fresh).toMatchObject({ payloads: [], hasMore: false });
    await expect(
      later.page({ orgId, limit: 10, startingAfter: afterFirst.nextCursor }),
    ).rejects.toMatchObject({
      kind: 'Gone',
      errors: { starting_after: [expect.stringContaining('older than the 30 days the feed keeps')] },
    });
    // A cursor with nothing dropped after it still works, and so does the fresh start's cursor.
    const caughtUp = await today.page({ orgId, limit: 10, startingAfter: afterFirst.nextCursor });
    expect(await later.page({ orgId, limit: 10, startingAfter: caughtUp.nextCursor })).toMatchObject({
      payloads: [],
    });
    await append('new-1');
    expect((await later.page({ orgId, limit: 10, startingAfter: fresh.nextCursor })).payloads).toHaveLength(
      1,
    );
  });

  it('orders by transaction id as a number, across a power of ten', async () => {
    const orgId = 9_100;
    const append = (streamId: string) =>
      store.append({
        streamId,
        streamType: 'thing',
        expectedVersion: 0,
        orgId,
        events: [
          {
            eventId: randomUUID(),
            type: TYPES[0]!,
            data: { record: { id: 1, version: 1 }, previous: {}, deleted: false },
          },
        ],
      });
    const first = await append('digits-1');
    // Transaction ids up to the next power of ten, so that the second event's has one digit more.
    const next = 10n ** BigInt(first.position.transactionId.length);
    await db.pool.query(
      `DO $$ BEGIN WHILE pg_current_xact_id()::text::numeric < ${next} LOOP COMMIT; END LOOP; END $$`,
    );
    const second = await append('digits-2');
    expect(second.position.transactionId).toHaveLength(first.position.transactionId.length + 1);
    const feed = new Feed(store);
    const page = await feed.page({ orgId, limit: 10 });
    expect(page.payloads.map((payload) => (JSON.parse(payload) as { data: unknown }).data)).toHaveLength(2);
    const ids = idsOf(page);
    const { events } = await store.readOrganization(
      orgId,
      { transactionId: '0', position: 0 },
      { limit: 10 },
    );
    expect(ids).toEqual(events.map((event) => event.eventId));
    expect(events.map((event) => event.streamId)).toEqual(['digits-1', 'digits-2']);
    // And from the first event's cursor, the second (a text comparison would put it first).
    const rest = await feed.page({ orgId, limit: 10, startingAfter: encodeCursor(first.position) });
    expect(idsOf(rest)).toEqual([events[1]!.eventId]);
  }, 120_000);

  it('refuses a cursor it did not answer', async () => {
    await expect(
      new Feed(store).page({ orgId: 1, limit: 1, startingAfter: 'not-a-cursor' }),
    ).rejects.toMatchObject({
      kind: 'Invalid',
      errors: { starting_after: [expect.any(String)] },
    });
  });
});

/** The feed as it is `daysLater` days from now. */
class Feed extends EventFeed {
  constructor(store: EventStore, daysLater = 0) {
    super(store, () => new Date(Date.now() + daysLater * 86_400_000));
  }
}

function idsOf(page: FeedPage): string[] {
  return page.payloads.map((payload) => (JSON.parse(payload) as { id: string }).id);
}
