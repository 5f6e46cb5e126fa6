/**
 * What the chaos run checks once the faults are over and the platform is quiet (issue 18): each
 * check is a list of counts that must be zero, with examples of what was wrong.
 */
import { EventStore } from '@ofp/event-store';
import { READ_SCHEMA } from '@ofp/models';
import { replayReadModel } from '@ofp/projector';
import type { Pool } from '@ofp/runtime';
import type { WebhookReceiver } from '@ofp/testing';
import {
  FAULT_ANSWER_MS,
  SKUS,
  WAREHOUSES,
  type ChaosClient,
  type HostileTally,
  type WorkloadTally,
} from './workload.js';

export interface Check {
  readonly name: string;
  /** Counts that must be zero for the check to pass; other figures go in `figures`. */
  readonly failures: Record<string, number>;
  readonly figures: Record<string, number>;
  readonly examples: unknown[];
}

const EXAMPLES = 5;

interface StoredEvent {
  event_id: string;
  stream_id: string;
  stream_type: string;
  version: number;
}

/** The organization's events (the webhooks' own left out: a subscription is not told of itself). */
export async function organizationEvents(pool: Pool, orgId: number): Promise<StoredEvent[]> {
  const { rows } = await pool.query<StoredEvent>(
    `SELECT event_id::text, stream_id, stream_type, version FROM es.events
      WHERE org_id = $1 AND stream_type <> 'webhooks' ORDER BY position`,
    [orgId],
  );
  return rows;
}

/**
 * Every acknowledged write is in the event store with the version it answered; the streams only
 * the workload writes (people, adjustments, shipments) hold exactly one event per acknowledged write.
 */
export function checkWrites(tally: WorkloadTally, events: readonly StoredEvent[]): Check {
  const stored = new Map<string, number[]>();
  for (const event of events) {
    const versions = stored.get(event.stream_id) ?? [];
    versions.push(event.version);
    stored.set(event.stream_id, versions);
  }
  const acknowledged = new Map<string, number>();
  const examples: unknown[] = [];
  let missing = 0;
  for (const write of tally.acknowledged) {
    acknowledged.set(write.stream, (acknowledged.get(write.stream) ?? 0) + 1);
    if (!stored.get(write.stream)?.includes(write.version)) {
      missing++;
      if (examples.length < EXAMPLES) examples.push({ missing: write });
    }
  }
  let extra = 0;
  for (const [stream, count] of acknowledged) {
    if (!/^(people|inventory_adjustments|shipments)-/.test(stream)) continue;
    const versions = stored.get(stream) ?? [];
    if (versions.length > count) {
      extra += versions.length - count;
      if (examples.length < EXAMPLES)
        examples.push({ extra: { stream, acknowledged: count, stored: versions } });
    }
  }
  return {
    name: 'acknowledged writes in the event store exactly once',
    failures: {
      missing,
      extra,
      refused: tally.refused.length,
      unanswered: tally.unanswered.length,
    },
    figures: {
      // A read right after the answer that did not show the write: since a write answered past
      // READ_YOUR_WRITES_TIMEOUT_MS holds its organization's reads (503 until the read model shows it,
      // docs/api-notes.md), one answered 200 is a breach of API.md §5, unless another writer's change
      // came between (a figure, not a failure, until the workload tells those apart).
      staleReads: tally.staleReads.length,
      acknowledged: tally.acknowledged.length,
      events: events.length,
      retries: tally.retries,
      ...writeLatencies(tally),
      replays: tally.replays,
    },
    examples: [...examples, ...tally.refused.slice(0, EXAMPLES), retryCauses(tally)],
  };
}

/** The most frequent causes of the attempts sent again, with when each was first and last met. */
export function retryCauses(tally: WorkloadTally): { retriedBecause: Record<string, string> } {
  const top = [...tally.retryCauses].sort(([, a], [, b]) => b.count - a.count).slice(0, EXAMPLES);
  return {
    retriedBecause: Object.fromEntries(
      top.map(([cause, { count, first, last }]) => [cause, `${count}x ${first}-${last}`]),
    ),
  };
}

/** The acknowledged writes' latencies (ms, retries included): median, 99th percentile, largest. */
function writeLatencies(tally: WorkloadTally): Record<string, number> {
  const sorted = tally.acknowledged.map((write) => write.ms).sort((a, b) => a - b);
  const at = (quantile: number) =>
    sorted[Math.min(sorted.length - 1, Math.floor(quantile * sorted.length))] ?? 0;
  return { p50Ms: at(0.5), p99Ms: at(0.99), maxMs: sorted[sorted.length - 1] ?? 0 };
}

/** Searches agree with GETs, and both with what the writers last acknowledged, for every person. */
export async function checkPeople(client: ChaosClient, tally: WorkloadTally): Promise<Check> {
  const searched = new Map<number, { last_name: string; version: number }>();
  for (let offset = 0; ; offset += 500) {
    const q = encodeURIComponent(JSON.stringify({ limit: 500, offset, filters: [] }));
    const page = await client.send(tally, 'GET', `/v2/people?q=${q}`);
    const results = (page?.body.results ?? []) as { id: number; last_name: string; version: number }[];
    for (const person of results) searched.set(person.id, person);
    if (results.length < 500) break;
  }
  const examples: unknown[] = [];
  let disagree = 0;
  let missing = 0;
  for (const [id, expected] of tally.people) {
    const got = (await client.send(tally, 'GET', `/v2/people/${id}`))?.body.results as
      { last_name: string; version: number } | undefined;
    const found = searched.get(id);
    if (!found || !got) {
      missing++;
      if (examples.length < EXAMPLES) examples.push({ id, expected, searched: found, got });
      continue;
    }
    const same = (r: { last_name: string; version: number }) =>
      r.last_name === expected.lastName && r.version === expected.version;
    if (!same(found) || !same(got)) {
      disagree++;
      if (examples.length < EXAMPLES) examples.push({ id, expected, searched: found, got });
    }
  }
  return {
    name: 'searches agree with GETs and with the acknowledged writes',
    failures: {
      missing,
      disagree,
      unexpected: [...searched.keys()].filter((id) => !tally.people.has(id)).length,
    },
    figures: { people: tally.people.size },
    examples,
  };
}

/** Inventory equals what the acknowledged adjustments, fulfillment orders and shipments make it. */
export async function checkInventory(client: ChaosClient, tally: WorkloadTally): Promise<Check> {
  const examples: unknown[] = [];
  let wrong = 0;
  for (const sku of SKUS) {
    for (const warehouse of WAREHOUSES) {
      const key = `${sku}/${warehouse}`;
      const q = encodeURIComponent(
        JSON.stringify({
          filters: [
            { operand: 'sku', operator: '=', value: sku },
            { operand: 'warehouse', operator: '=', value: warehouse },
          ],
        }),
      );
      const found = ((await client.send(tally, 'GET', `/v2/inventory?q=${q}`))?.body.results ?? []) as {
        on_hand: number;
        committed: number;
        available: number;
      }[];
      const onHand = tally.onHand.get(key) ?? 0;
      const committed = tally.committed.get(key) ?? 0;
      const expected = { on_hand: onHand, committed, available: onHand - committed };
      const record = found[0] ?? { on_hand: 0, committed: 0, available: 0 };
      const actual = { on_hand: record.on_hand, committed: record.committed, available: record.available };
      if (JSON.stringify(actual) !== JSON.stringify(expected)) {
        wrong++;
        examples.push({ sku, warehouse, expected, actual });
      }
    }
  }
  return {
    name: 'inventory equals an independent computation',
    failures: { wrong },
    figures: { records: SKUS.length * WAREHOUSES.length },
    examples,
  };
}

/** The read model equals a replay of the event store into a scratch schema, table by table. */
export async function checkReadModel(pool: Pool): Promise<Check> {
  const scratch = 'chaos_replay';
  await replayReadModel(pool, new EventStore(pool, { outbox: false }), scratch, () => {});
  const { rows: tables } = await pool.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY table_name`,
    [READ_SCHEMA],
  );
  const examples: unknown[] = [];
  let differing = 0;
  let rows = 0;
  for (const { table_name: table } of tables) {
    const live = `${READ_SCHEMA}.${table}`;
    const replay = `${scratch}.${table}`;
    const { rows: diff } = await pool.query<{ only_live: number; only_replay: number; total: number }>(
      `SELECT (SELECT count(*) FROM (SELECT t::text FROM ${live} t EXCEPT ALL SELECT t::text FROM ${replay} t) d)::int AS only_live,
              (SELECT count(*) FROM (SELECT t::text FROM ${replay} t EXCEPT ALL SELECT t::text FROM ${live} t) d)::int AS only_replay,
              (SELECT count(*) FROM ${live})::int AS total`,
    );
    const { only_live: onlyLive, only_replay: onlyReplay, total } = diff[0]!;
    rows += total;
    if (onlyLive + onlyReplay > 0) {
      differing += onlyLive + onlyReplay;
      examples.push({ table, onlyLive, onlyReplay });
    }
  }
  await pool.query(`DROP SCHEMA ${scratch} CASCADE`);
  return {
    name: 'read model equals a fresh rebuild from the event store',
    failures: { differingRows: differing },
    figures: { tables: tables.length, rows },
    examples,
  };
}

/**
 * Every event reached every receiver at least once (verified with its secret), each receiver saw each
 * record's events in `sequence` order, and every `sequence` is the event's version; duplicates counted.
 */
export function checkWebhooks(receivers: readonly WebhookReceiver[], events: readonly StoredEvent[]): Check {
  const byId = new Map(events.map((event) => [event.event_id, event]));
  const failures = { missing: 0, unverified: 0, outOfOrder: 0, wrongSequence: 0, unknown: 0 };
  let duplicates = 0;
  let received = 0;
  const examples: unknown[] = [];
  for (const [index, receiver] of receivers.entries()) {
    const seen = new Set<string>();
    const last = new Map<string, number>();
    for (const delivery of receiver.received) {
      received++;
      if (!delivery.verified || !delivery.payload) {
        failures.unverified++;
        continue;
      }
      // The other receiver's subscription being made: an event of the webhooks model, not the workload's.
      if (delivery.payload.type.startsWith('webhook.')) continue;
      if (seen.has(delivery.id)) {
        duplicates++;
        continue;
      }
      seen.add(delivery.id);
      const event = byId.get(delivery.id);
      if (!event) {
        failures.unknown++;
        if (examples.length < EXAMPLES) examples.push({ receiver: index, unknown: delivery.id });
        continue;
      }
      if (delivery.payload.sequence !== event.version) failures.wrongSequence++;
      const before = last.get(event.stream_id) ?? 0;
      if (event.version < before) {
        failures.outOfOrder++;
        if (examples.length < EXAMPLES)
          examples.push({ receiver: index, stream: event.stream_id, after: before, got: event.version });
      }
      last.set(event.stream_id, Math.max(before, event.version));
    }
    for (const event of events) {
      if (seen.has(event.event_id)) continue;
      failures.missing++;
      if (examples.length < EXAMPLES) examples.push({ receiver: index, missing: event });
    }
  }
  return {
    name: 'webhooks: every event to every receiver, in sequence order per record',
    failures,
    figures: { receivers: receivers.length, events: events.length, received, duplicates },
    examples,
  };
}

/**
 * The hostile writer's writes were all answered (2xx or 4xx; a 5xx is sent again until it is not):
 * an input the platform fails on each time is never answered. Its accepted writes are in the read
 * model's check, its effect on the others in every other check.
 */
export function checkHostile(hostile: HostileTally): Check {
  const count = (from: number, to: number) =>
    [...hostile.statuses].filter(([status]) => status >= from && status < to).reduce((n, [, k]) => n + k, 0);
  return {
    name: 'hostile writes answered, never failed on',
    failures: { unanswered: hostile.unanswered.length },
    figures: {
      accepted: count(200, 300),
      refused: count(400, 500),
      retries: hostile.tally.retries,
    },
    examples: [...hostile.unanswered.slice(0, EXAMPLES), retryCauses(hostile.tally)],
  };
}

/**
 * No request was answered 500, by either kind of writer, in the workload or in the checks' reads: a
 * fault shows as a 503 (a dependency away), a timeout or a refused connection, never as the platform
 * failing on a request. A 500 counts even when the same request, sent again, was answered otherwise:
 * an integrator who does not send it again has lost the write. Each one is named, with its
 * `X-Request-Id` for the platform's logs.
 */
export function checkInternalErrors(tally: WorkloadTally, hostile: HostileTally): Check {
  return {
    name: 'no request answered 500',
    failures: { writers: tally.internalErrors.length, hostile: hostile.tally.internalErrors.length },
    figures: {},
    examples: [
      ...tally.internalErrors.slice(0, EXAMPLES),
      ...hostile.tally.internalErrors.slice(0, EXAMPLES).map((error) => ({ hostile: error })),
    ],
  };
}

/**
 * No platform process exited by itself: `exits` are those down at the workload's end that no fault
 * left down (each with how it ended and its last lines). Its replica may have done its work, so no
 * other check fails for it, and the run restarts it; a process that crashed and was then killed and
 * restarted by a fault is not seen.
 */
export function checkExits(exits: readonly string[]): Check {
  return {
    name: 'no platform process exited by itself',
    failures: { exited: exits.length },
    figures: {},
    examples: exits.slice(0, EXAMPLES),
  };
}

/**
 * While a replica's link to Postgres was cut (`windows`, epoch ms), every attempt that failed did so
 * within FAULT_ANSWER_MS (a 503 from the request's database deadline, API.md §3), by either kind of
 * writer: an attempt that hung on the cut replica longer, or timed out, is a finding.
 */
export function checkCutAnswers(
  tallies: readonly WorkloadTally[],
  windows: readonly { fromMs: number; untilMs: number }[],
): Check {
  const during = tallies
    .flatMap((tally) => tally.slowFailures)
    .filter(({ sentAt, ms }) =>
      windows.some(({ fromMs, untilMs }) => sentAt <= untilMs && sentAt + ms >= fromMs),
    );
  return {
    name: `failures answered within ${FAULT_ANSWER_MS / 1000} s while an api was cut from Postgres`,
    failures: { slower: during.length },
    figures: { cuts: windows.length },
    examples: during.slice(0, EXAMPLES),
  };
}
