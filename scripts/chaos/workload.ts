/**
 * The chaos run's workload (issue 18): writers that each own their records, send every write with an
 * `Idempotency-Key` and send it again with the same key until it is answered, and keep what every
 * answered write must have done, computed from API.md §6 alone.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { uniformInt } from 'pure-rand/distribution/uniformInt';
import type { RandomGenerator } from 'pure-rand/types/RandomGenerator';
import fc from 'fast-check';
import { clientCredentialsToken } from '@ofp/client';
import { MODELS } from '@ofp/models';
import { hostileBody, hostileWrite, junkBody, validBodies } from '@ofp/testing';

export const SKUS = ['CHAOS-A', 'CHAOS-B', 'CHAOS-C'];
export const WAREHOUSES = ['EAST', 'WEST'];

/** One attempt's limit, and how long a write is sent again before it counts as never answered. */
const ATTEMPT_TIMEOUT_MS = 10_000;
/** A fault must be answered (a 5xx) within this (API.md §3: 503 within 5 s even while the database hangs). */
export const FAULT_ANSWER_MS = 5_000;
const GIVE_UP_MS = 180_000;

/** A write the platform answered with 200 or 201: the record's stream and the version it answered. */
export interface Acknowledged {
  readonly stream: string;
  readonly version: number;
  /** From the first attempt to the answer, retries included. */
  readonly ms: number;
}

/** An attempt the platform answered 500: the request, its `X-Request-Id` (to find it in the logs), the answer. */
export interface InternalError {
  readonly request: string;
  readonly requestId: string | null;
  /** The answer's body (its start). */
  readonly answer: string;
}

/**
 * An attempt that failed slowly: when it was sent (epoch ms), how long it took, how it ended (the
 * status and the envelope's message, or the error's name), so that a slow 503 says which wait it was.
 */
export interface SlowFailure {
  readonly request: string;
  readonly sentAt: number;
  readonly ms: number;
  readonly ended: string;
}

/** What the writers did and saw. */
export interface WorkloadTally {
  acknowledged: Acknowledged[];
  /** Writes answered with a refusal (4xx) the model did not expect: each one is a finding. */
  refused: { request: string; status: number; errors: unknown }[];
  /** Writes never answered within GIVE_UP_MS. */
  unanswered: string[];
  /** Attempts sent again (timeouts, connection errors, 5xx, 429, a key still in progress). */
  retries: number;
  /**
   * Why attempts were sent again, by cause (`503 <the envelope's message>`, `TimeoutError`, `token:
   * <why>`): how many, and the wall-clock times of the first and the last, so that a failed run says
   * what the writers met and when.
   */
  retryCauses: Map<string, { count: number; first: string; last: string }>;
  /**
   * Of those, attempts answered 500: each one a finding, even when the same request was answered
   * otherwise later (a fault must show as a 503, a timeout or a refused connection, never as a 500).
   */
  internalErrors: InternalError[];
  /**
   * Attempts that failed (a 5xx, a timeout, a reset) later than FAULT_ANSWER_MS after they were sent:
   * a finding while the platform's link to Postgres is cut (checkCutAnswers), since the api must then
   * answer 503 in time; elsewhere a replica paused or a broker frozen may hold a request longer.
   */
  slowFailures: SlowFailure[];
  /** Answers that were replays of an earlier attempt (`Idempotent-Replayed: true`). */
  replays: number;
  /** Reads right after an acknowledged person write that did not show it (API.md §5, read-your-writes). */
  staleReads: { id: number; expected: number; search: unknown; get: unknown }[];
  /** Per (sku/warehouse): what inventory must hold, from the acknowledged writes alone. */
  onHand: Map<string, number>;
  committed: Map<string, number>;
  /** Every person a writer owns, with its last name and version as last acknowledged. */
  people: Map<number, { lastName: string; version: number }>;
}

export function emptyTally(): WorkloadTally {
  return {
    acknowledged: [],
    refused: [],
    unanswered: [],
    retries: 0,
    retryCauses: new Map(),
    internalErrors: [],
    slowFailures: [],
    replays: 0,
    staleReads: [],
    onHand: new Map(),
    committed: new Map(),
    people: new Map(),
  };
}

/** An answer to a request: its status, its envelope, and whether it replayed an earlier one. */
export interface Answer {
  readonly status: number;
  readonly body: { readonly results: unknown; readonly errors: unknown };
  readonly replayed: boolean;
}

/** The record in a write's answer. */
interface Written {
  readonly id: number;
  readonly version: number;
}

/** A request body sent as it is (JSON text of values no JavaScript value holds, or no JSON at all). */
export class RawBody {
  constructor(readonly bytes: string | Buffer) {}
}

/** A request as a finding names it: method, path and (the start of) its body. */
export function describeRequest(method: string, path: string, body?: unknown): string {
  const text = body instanceof RawBody ? String(body.bytes) : JSON.stringify(body);
  return `${method} ${path}${text === undefined ? '' : ` ${text.slice(0, 200)}`}`;
}

/** An integrator's client: a token of the client-credentials grant, fetched again when refused. */
export class ChaosClient {
  private token: Promise<string> | undefined;

  constructor(
    private readonly urls: { auth: string; api: string },
    private readonly credentials: { clientId: string; clientSecret: string },
  ) {}

  /**
   * Sends a request until it is answered with anything but a sign of a fault (a timeout, a refused
   * connection, 5xx, 429, a 409 for a key still in progress); resolves with that answer, or undefined
   * after GIVE_UP_MS.
   */
  async send(
    tally: WorkloadTally,
    method: string,
    path: string,
    body?: unknown,
    key?: string,
  ): Promise<Answer | undefined> {
    const deadline = Date.now() + GIVE_UP_MS;
    for (let attempt = 0; Date.now() < deadline; attempt++) {
      if (attempt > 0) {
        tally.retries++;
        await sleep(Math.min(2_000, 100 * 2 ** attempt));
      }
      let sentAt = 0;
      const failedSlowly = (ended: string): void => {
        const ms = Date.now() - sentAt;
        if (sentAt > 0 && ms > FAULT_ANSWER_MS)
          tally.slowFailures.push({ request: describeRequest(method, path, body), sentAt, ms, ended });
        sentAt = 0;
      };
      try {
        const token = await (this.token ??= clientCredentialsToken(this.urls.auth, this.credentials));
        sentAt = Date.now();
        const response = await fetch(`${this.urls.api}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${token}`,
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
            ...(key === undefined ? {} : { 'idempotency-key': key }),
          },
          ...(body === undefined
            ? {}
            : { body: body instanceof RawBody ? body.bytes : JSON.stringify(body) }),
          signal: AbortSignal.timeout(ATTEMPT_TIMEOUT_MS),
        });
        const text = await response.text();
        if (response.status === 401) {
          retried(tally, '401');
          this.token = undefined;
          continue;
        }
        // Before the body is parsed: a 500 that is not the envelope is one all the same.
        if (response.status === 500)
          tally.internalErrors.push({
            request: describeRequest(method, path, body),
            requestId: response.headers.get('x-request-id'),
            answer: text.slice(0, 300),
          });
        const parsed = JSON.parse(text) as Answer['body'];
        if (response.status >= 500 || response.status === 429) {
          const cause = `${response.status} ${firstMessage(parsed.errors)}`;
          if (response.status >= 500) failedSlowly(cause);
          retried(tally, cause);
          continue;
        }
        if (response.status === 409 && JSON.stringify(parsed.errors).includes('Idempotency-Key')) {
          retried(tally, '409 key in progress');
          continue;
        }
        return {
          status: response.status,
          body: parsed,
          replayed: response.headers.get('idempotent-replayed') === 'true',
        };
      } catch (error) {
        // A timeout, a reset or a refused connection (a replica or Postgres down): send it again.
        retried(tally, `${sentAt === 0 ? 'token: ' : ''}${describeFailure(error)}`);
        failedSlowly((error as Error).name);
        this.token = undefined;
      }
    }
    return undefined;
  }
}

/** Counts one attempt sent again because of `cause`. */
function retried(tally: WorkloadTally, cause: string): void {
  const now = new Date().toISOString().slice(11, 19);
  const seen = tally.retryCauses.get(cause);
  if (seen) {
    seen.count++;
    seen.last = now;
  } else tally.retryCauses.set(cause, { count: 1, first: now, last: now });
}

/** The first message of an envelope's `errors` (API.md §3: `{ "base": ["..."] }` or per field), short. */
function firstMessage(errors: unknown): string {
  const first: unknown = errors !== null && typeof errors === 'object' ? Object.values(errors)[0] : undefined;
  const message: unknown = Array.isArray(first) ? first[0] : undefined;
  return typeof message === 'string' ? message.slice(0, 80) : '(no message)';
}

/** A failed fetch as `name` or `name (cause's code)`: `TimeoutError`, `TypeError (ECONNREFUSED)`. */
function describeFailure(error: unknown): string {
  const { name, cause } = error as Error & { cause?: { code?: string } };
  return cause?.code ? `${name} (${cause.code})` : name;
}

interface Fulfillment {
  id: number;
  warehouse: string;
  lines: { sku: string; quantity: number; shipped: number }[];
  cancelled: boolean;
  shipments: number;
}

const add = (map: Map<string, number>, key: string, delta: number): void => {
  map.set(key, (map.get(key) ?? 0) + delta);
};

/** One writer: its own people and fulfillment orders, so that it alone knows each one's next version. */
export class Writer {
  private readonly people: number[] = [];
  private readonly fulfillments: Fulfillment[] = [];

  constructor(
    private readonly client: ChaosClient,
    private readonly tally: WorkloadTally,
    private readonly random: RandomGenerator,
  ) {}

  /** Writes until `until()` says stop. */
  async run(until: () => boolean): Promise<void> {
    while (!until()) await this.step();
  }

  private pick<T>(items: readonly T[]): T | undefined {
    return items.length === 0 ? undefined : items[uniformInt(this.random, 0, items.length - 1)];
  }

  private async step(): Promise<void> {
    const roll = uniformInt(this.random, 1, 100);
    if (roll <= 20 || this.people.length === 0) return this.createPerson();
    if (roll <= 45) return this.updatePerson(this.pick(this.people)!);
    if (roll <= 65) return this.adjust();
    if (roll <= 80) return this.fulfill();
    const open = this.fulfillments.filter((fo) => !fo.cancelled);
    const shippable = open.filter((fo) => fo.lines.some((line) => line.shipped < line.quantity));
    if (roll <= 92) {
      const fo = this.pick(shippable);
      return fo ? this.ship(fo) : this.adjust();
    }
    const fo = this.pick(open.filter((each) => each.shipments === 0));
    return fo ? this.cancel(fo) : this.fulfill();
  }

  /** Sends one write with a key of its own; the answer's record when it was acknowledged. */
  private async write(
    method: string,
    path: string,
    body: unknown,
    model: string,
  ): Promise<Written | undefined> {
    const request = describeRequest(method, path, body);
    const begun = Date.now();
    const answer = await this.client.send(this.tally, method, path, body, randomUUID());
    if (!answer) {
      this.tally.unanswered.push(request);
      return undefined;
    }
    if (answer.replayed) this.tally.replays++;
    if (answer.status !== 200 && answer.status !== 201) {
      this.tally.refused.push({ request, status: answer.status, errors: answer.body.errors });
      return undefined;
    }
    const record = answer.body.results as Written;
    const ms = Date.now() - begun;
    this.tally.acknowledged.push({ stream: `${model}-${record.id}`, version: record.version, ms });
    return record;
  }

  private async createPerson(): Promise<void> {
    const lastName = `Chaos-${randomUUID().slice(0, 8)}`;
    const person = await this.write(
      'POST',
      '/v2/people',
      { last_name: lastName, first_name: 'Ada' },
      'people',
    );
    if (!person) return;
    this.people.push(person.id);
    this.tally.people.set(person.id, { lastName, version: person.version });
    await this.checkVisible(person.id, person.version);
  }

  private async updatePerson(id: number): Promise<void> {
    const lastName = `Chaos-${randomUUID().slice(0, 8)}`;
    const person = await this.write('PATCH', `/v2/people/${id}`, { last_name: lastName }, 'people');
    if (!person) return;
    this.tally.people.set(id, { lastName, version: person.version });
    await this.checkVisible(id, person.version);
  }

  /** Read-your-writes: the search and the GET right after the answer show that version. */
  private async checkVisible(id: number, version: number): Promise<void> {
    const q = encodeURIComponent(JSON.stringify({ filters: [{ operand: 'id', operator: '=', value: id }] }));
    const search = await this.client.send(this.tally, 'GET', `/v2/people?q=${q}`);
    const get = await this.client.send(this.tally, 'GET', `/v2/people/${id}`);
    const searched = (search?.body.results as { version: number }[] | undefined)?.[0]?.version;
    const got = (get?.body.results as { version: number } | undefined)?.version;
    if (searched !== version || got !== version)
      this.tally.staleReads.push({ id, expected: version, search: searched, get: got });
  }

  private async adjust(): Promise<void> {
    const sku = this.pick(SKUS)!;
    const warehouse = this.pick(WAREHOUSES)!;
    const delta = uniformInt(this.random, 1, 20);
    const body = { sku, warehouse, quantity_delta: delta, reason: 'chaos' };
    if (await this.write('POST', '/v2/inventory_adjustments', body, 'inventory_adjustments'))
      add(this.tally.onHand, `${sku}/${warehouse}`, delta);
  }

  private async fulfill(): Promise<void> {
    const warehouse = this.pick(WAREHOUSES)!;
    const skus = uniformInt(this.random, 1, 2) === 1 ? [this.pick(SKUS)!] : SKUS.slice(0, 2);
    const lines = skus.map((sku) => ({ sku, quantity: uniformInt(this.random, 1, 5) }));
    const order = await this.write(
      'POST',
      '/v2/orders',
      {
        order_number: `CHAOS-${randomUUID()}`,
        status: 'open',
        lines: lines.map((line) => ({ ...line, unit_price: '2.50' })),
      },
      'orders',
    );
    if (!order) return;
    const fo = await this.write(
      'POST',
      '/v2/fulfillment_orders',
      { order_id: order.id, warehouse, lines },
      'fulfillment_orders',
    );
    if (!fo) return;
    this.fulfillments.push({
      id: fo.id,
      warehouse,
      lines: lines.map((line) => ({ ...line, shipped: 0 })),
      cancelled: false,
      shipments: 0,
    });
    for (const line of lines) add(this.tally.committed, `${line.sku}/${warehouse}`, line.quantity);
  }

  private async ship(fo: Fulfillment): Promise<void> {
    const line = this.pick(fo.lines.filter((each) => each.shipped < each.quantity))!;
    const quantity = uniformInt(this.random, 1, line.quantity - line.shipped);
    const shipment = await this.write(
      'POST',
      '/v2/shipments',
      {
        fulfillment_order_id: fo.id,
        carrier: 'UPS',
        packages: [
          { tracking_number: `1Z${randomUUID().slice(0, 12)}`, lines: [{ sku: line.sku, quantity }] },
        ],
      },
      'shipments',
    );
    if (!shipment) return;
    line.shipped += quantity;
    fo.shipments++;
    add(this.tally.committed, `${line.sku}/${fo.warehouse}`, -quantity);
    add(this.tally.onHand, `${line.sku}/${fo.warehouse}`, -quantity);
  }

  private async cancel(fo: Fulfillment): Promise<void> {
    const cancelled = await this.write(
      'PUT',
      `/v2/fulfillment_orders/${fo.id}`,
      { status: 'cancelled' },
      'fulfillment_orders',
    );
    if (!cancelled) return;
    fo.cancelled = true;
    for (const line of fo.lines) add(this.tally.committed, `${line.sku}/${fo.warehouse}`, -line.quantity);
  }
}

/** What the hostile writer sent, by the status that answered each write (retries aside). */
export interface HostileTally {
  readonly tally: WorkloadTally;
  readonly statuses: Map<number, number>;
  /** Writes never answered within GIVE_UP_MS: an input that fails the same way each time. */
  readonly unanswered: string[];
}

/** The models the api writes: the hostile writer's targets (webhooks live on another service). */
const API_WRITTEN = Object.values(MODELS).filter((model) => model.writes !== 'read-only');

/**
 * The hostile writer (issue 23): an organization of its own that sends, among the others' writes, a
 * hostile value at a random column of a valid body of a random model, or a body that is no JSON object
 * or no UTF-8 (`@ofp/testing`, as the hostile-input property test). Any answer but a 5xx will do:
 * what it must not do shows in the other checks (every consumer goes on, the read model equals a
 * rebuild, which includes whatever of its writes was accepted).
 */
export class HostileWriter {
  private readonly writes = fc.oneof(
    { weight: 9, arbitrary: hostileWrite(API_WRITTEN) },
    { weight: 1, arbitrary: junkBody(API_WRITTEN) },
  );
  private sent = 0;

  constructor(
    private readonly client: ChaosClient,
    private readonly hostile: HostileTally,
    private readonly seed: number,
  ) {}

  /** Creates the records its bodies refer to (and its updates change), then writes until `until()`. */
  async run(until: () => boolean): Promise<void> {
    const create = async (model: string, body: Record<string, unknown>): Promise<number> => {
      const answer = await this.client.send(this.hostile.tally, 'POST', `/v2/${model}`, body, randomUUID());
      if (answer?.status !== 201) throw new Error(`hostile writer: creating ${model}: ${answer?.status}`);
      return (answer.body.results as Written).id;
    };
    const person = await create('people', { last_name: 'Hostile' });
    const order = await create('orders', { order_number: `HOSTILE-${randomUUID()}`, customer_id: person });
    const line = { sku: 'SKU-1', quantity: 2 };
    const fulfillmentOrder = await create('fulfillment_orders', {
      order_id: order,
      warehouse: 'W',
      lines: [line],
    });
    const bodies = validBodies({ person, order, fulfillmentOrder });
    const updatable = new Map([
      ['people', person],
      ['orders', order],
      ['fulfillment_orders', fulfillmentOrder],
    ]);
    while (!until()) {
      // One sample per write, from a seed of the run's: the same seed sends the same writes.
      const write = fc.sample(this.writes, { seed: (this.seed + this.sent++) | 0, numRuns: 1 })[0]!;
      const id = write.kind === 'update' ? updatable.get(write.model) : undefined;
      const method = id === undefined ? 'POST' : 'PUT';
      const path = `/v2/${write.model}${id === undefined ? '' : `/${id}`}`;
      const body = hostileBody(write, bodies);
      const raw = new RawBody(body);
      const answer = await this.client.send(this.hostile.tally, method, path, raw, randomUUID());
      if (!answer) {
        this.hostile.unanswered.push(describeRequest(method, path, raw));
        continue;
      }
      this.hostile.statuses.set(answer.status, (this.hostile.statuses.get(answer.status) ?? 0) + 1);
    }
  }
}
