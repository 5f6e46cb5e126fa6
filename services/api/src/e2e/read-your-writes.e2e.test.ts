// @runs-alone: times a read's 503 against its deadline (within 0.5 s)
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { recordStreamId } from '@ofp/contracts';
import {
  createIntegrator,
  RUN_MODES,
  searchPath,
  startTestPlatform,
  until,
  type Integrator,
  type TestPlatform,
} from '@ofp/testing';

// API.md §5 read-your-writes when the read model falls behind: a write whose wait for the read model
// ran out (READ_YOUR_WRITES_TIMEOUT_MS, short here) still answers, and from then on its
// organization's searches and GETs never show the state before it: they wait for the read model, and
// answer 503 with Retry-After while it stays behind. The projector is held back by a lock on the
// people read model (reads pass it; the projector's upserts wait). What holds the reads is a row in
// Postgres, read in each read's own statement, so any api process of the organization sees it.

const WRITE_WAIT_MS = '300';

describe.each(RUN_MODES)('read-your-writes with the projector held back ($mode)', ({ mode }) => {
  let platform: TestPlatform;
  let acme: Integrator;
  let other: Integrator;

  beforeAll(async () => {
    platform = await startTestPlatform(mode, { READ_YOUR_WRITES_TIMEOUT_MS: WRITE_WAIT_MS });
    acme = await createIntegrator(platform, { name: 'Acme' });
    other = await createIntegrator(platform, { name: 'Other' });
    // Each organization's seed records exist before the projector is held back.
    for (const each of [acme, other]) expect((await each.request('GET', '/v2/people')).status).toBe(200);
  }, 180_000);

  afterAll(async () => {
    await platform?.stop();
  });

  /** The sum of a metric's series with these labels, over the api's /metrics. */
  const sample = async (name: string, labels: Record<string, string>): Promise<number> => {
    const text = await (await fetch(`${platform.processes.api ?? platform.processes.all}/metrics`)).text();
    return text
      .split('\n')
      .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
      .filter((line) => Object.entries(labels).every(([key, value]) => line.includes(`${key}="${value}"`)))
      .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
  };

  /**
   * Makes the projector unable to apply the events of the streams `when` picks (a trigger refuses them,
   * standing in for a constraint gone wrong), so that it parks them after its bounded retries (API.md
   * §12); the function returned drops the trigger.
   */
  const refuseProjecting = async (when: string): Promise<() => Promise<void>> => {
    await platform.database.pool.query(`
      CREATE OR REPLACE FUNCTION public.refuse_stream() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'stream % refused', NEW.stream_id; END $$`);
    await platform.database.pool.query(`
      CREATE TRIGGER refuse_stream BEFORE INSERT ON read.stream_versions FOR EACH ROW
        WHEN (${when}) EXECUTE FUNCTION public.refuse_stream()`);
    return async () => {
      await platform.database.pool.query('DROP TRIGGER IF EXISTS refuse_stream ON read.stream_versions');
    };
  };

  it('answers the write, then never shows the state before it to its organization', async () => {
    const lock = new pg.Client({ connectionString: platform.database.url });
    await lock.connect();
    try {
      await lock.query('BEGIN');
      await lock.query('LOCK TABLE read.people IN EXCLUSIVE MODE');
      const lastName = `Held-${randomBytes(4).toString('hex')}`;
      const created = await acme.request<{ id: number }>('POST', '/v2/people', {
        body: { last_name: lastName },
      });
      expect(created.status).toBe(201);
      const { id } = created.body.results;

      const search = searchPath('people', {
        filters: [{ operand: 'last_name', operator: '=', value: lastName }],
      });
      for (const path of [`/v2/people/${id}`, search]) {
        const read = await acme.request('GET', path);
        expect({ path, status: read.status, retryAfter: read.headers.get('retry-after') }).toEqual({
          path,
          status: 503,
          retryAfter: '1',
        });
        expect(read.body).toEqual({
          count: 0,
          results: null,
          errors: { base: [expect.stringContaining('latest writes')] },
        });
      }
      // Another organization reads on: nothing of its own is unsettled.
      expect((await other.request('GET', '/v2/people')).status).toBe(200);

      // Reads of the write begin every 250 ms from before the lock is released, each held up to the
      // read's wait, so that one is waiting whenever the read model shows the write: a read begun just
      // after it, finding the write forgotten, would count nothing (one read at a time missed it once).
      type Shown = Awaited<ReturnType<typeof acme.request<{ id: number; last_name: string }>>>;
      const answers: Shown[] = [];
      const answered = () => answers.find((read) => read.status !== 503);
      const reads = (async () => {
        const [pending, deadline] = [[] as Promise<unknown>[], Date.now() + 60_000];
        while (!answered() && Date.now() < deadline) {
          pending.push(
            acme
              .request<{ id: number; last_name: string }>('GET', `/v2/people/${id}`)
              .then((read) => answers.push(read)),
          );
          await sleep(250);
        }
        await Promise.all(pending);
        return answered();
      })();
      await sleep(500);
      await lock.query('ROLLBACK');
      const shown = await reads;
      expect(shown?.status).toBe(200);
      expect(shown?.body.results).toMatchObject({ id, last_name: lastName });
      const found = await acme.request('GET', search);
      expect(found.status).toBe(200);
      expect(found.body.results).toEqual([expect.objectContaining({ id })]);
      // Once shown, the organization's reads no longer wait for it.
      const { rows } = await platform.database.pool.query(
        'SELECT count(*)::int AS n FROM api.unsettled_writes',
      );
      expect(rows[0]).toEqual({ n: 0 });
      // The metrics show it: the write's wait ran out; the held reads answered 503, then one read.
      expect(
        await sample('read_your_writes_wait_seconds_count', { outcome: 'timed_out' }),
      ).toBeGreaterThanOrEqual(1);
      expect(
        await sample('read_your_writes_held_reads_total', { outcome: 'unavailable' }),
      ).toBeGreaterThanOrEqual(2);
      expect(
        await sample('read_your_writes_held_reads_total', { outcome: 'caught_up' }),
      ).toBeGreaterThanOrEqual(1);
    } finally {
      await lock.end();
    }
  }, 120_000);

  it("answers a held read's 503 within the read's database deadline, though its first statement took most of it", async () => {
    // API.md §3: a 503 within 5 s. The read's first statement waits on a lock for most of the
    // request's database deadline (DATABASE_REQUEST_DEADLINE_MS, 3 s by default), as on a slow or
    // loaded database; it then finds the organization's write unsettled. Its wait for the read model
    // must end at that same deadline: a wait of READ_CATCH_UP_MS (2 s) of its own after the statement
    // answered the 503 about 4 s after the request, a second past what the deadline allows.
    const deadlineMs = 3_000;
    const statementMs = 2_000;
    const held = new pg.Client({ connectionString: platform.database.url });
    const slow = new pg.Client({ connectionString: platform.database.url });
    await Promise.all([held.connect(), slow.connect()]);
    try {
      await held.query('BEGIN');
      await held.query('LOCK TABLE read.people IN EXCLUSIVE MODE');
      expect((await acme.request('POST', '/v2/people', { body: { last_name: 'Late' } })).status).toBe(201);
      await slow.query('BEGIN');
      await slow.query('LOCK TABLE api.unsettled_writes IN ACCESS EXCLUSIVE MODE');
      const released = sleep(statementMs).then(() => slow.query('COMMIT'));
      const begun = Date.now();
      const read = await acme.request('GET', '/v2/people');
      const ms = Date.now() - begun;
      await released;
      expect(read.status).toBe(503);
      expect(read.body.errors).toEqual({ base: [expect.stringContaining('latest writes')] });
      expect(ms).toBeGreaterThanOrEqual(statementMs);
      expect(ms).toBeLessThan(deadlineMs + 500);
    } finally {
      await Promise.all([held.end(), slow.end()]);
      // The next tests count the recorded writes: this one is shown and forgotten first.
      await until(
        'the late write shown',
        60_000,
        () => acme.request('GET', '/v2/people'),
        (answer) => answer.status !== 503,
      );
    }
  }, 120_000);

  it('forgets a recorded write once the read model shows it, though its organization does not read again', async () => {
    const lock = new pg.Client({ connectionString: platform.database.url });
    await lock.connect();
    const unsettled = async () =>
      (
        await platform.database.pool.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM api.unsettled_writes',
        )
      ).rows[0]!.n;
    try {
      await lock.query('BEGIN');
      await lock.query('LOCK TABLE read.people IN EXCLUSIVE MODE');
      const created = await acme.request('POST', '/v2/people', { body: { last_name: 'Unread' } });
      expect(created.status).toBe(201);
      expect(await unsettled()).toBe(1);
    } finally {
      await lock.end();
    }
    // No read of the organization follows: the row goes once the projector has applied the write.
    await until('the recorded write forgotten', 40_000, unsettled, (n) => n === 0);
  }, 120_000);

  it('records a write whose record failed once the database takes it, and holds the reads for it', async () => {
    const lock = new pg.Client({ connectionString: platform.database.url });
    await lock.connect();
    // The record of the write's timed-out wait fails (a trigger refuses it, standing in for a database
    // that hung just then); the write still answers, since it committed.
    await platform.database.pool.query(`
      CREATE OR REPLACE FUNCTION public.refuse_unsettled() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'unsettled write refused'; END $$`);
    await platform.database.pool.query(`
      CREATE TRIGGER refuse_unsettled BEFORE INSERT ON api.unsettled_writes FOR EACH ROW
        EXECUTE FUNCTION public.refuse_unsettled()`);
    try {
      await lock.query('BEGIN');
      await lock.query('LOCK TABLE read.people IN EXCLUSIVE MODE');
      const created = await acme.request<{ id: number }>('POST', '/v2/people', {
        body: { last_name: 'Unrecorded' },
      });
      expect(created.status).toBe(201);
      expect(await sample('read_your_writes_unrecorded_writes', {})).toBe(1);

      await platform.database.pool.query('DROP TRIGGER refuse_unsettled ON api.unsettled_writes');
      await until(
        'the write recorded again',
        10_000,
        () =>
          platform.database.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM api.unsettled_writes'),
        (result) => result.rows[0]?.n === 1,
      );
      expect(await sample('read_your_writes_unrecorded_writes', {})).toBe(0);
      // The organization's reads no longer show the state before the write.
      const read = await acme.request('GET', `/v2/people/${created.body.results.id}`);
      expect(read.status).toBe(503);

      await lock.query('ROLLBACK');
      const shown = await until(
        'the write shown',
        60_000,
        () => acme.request('GET', `/v2/people/${created.body.results.id}`),
        (answer) => answer.status !== 503,
      );
      expect(shown.status).toBe(200);
    } finally {
      await platform.database.pool.query('DROP TRIGGER IF EXISTS refuse_unsettled ON api.unsettled_writes');
      await lock.end();
    }
  }, 120_000);

  it('does not hold the organization’s reads behind a write whose event a consumer parked', async () => {
    // The projector cannot apply this one record's first event, so it parks it.
    const id = 900_000_000 + (randomBytes(3).readUIntBE(0, 3) % 1_000_000);
    const stream = recordStreamId('people', id);
    const allow = await refuseProjecting(`NEW.stream_id = '${stream}'`);
    try {
      const created = await acme.request('POST', `/v2/people/${id}`, { body: { last_name: 'Parked' } });
      expect(created.status).toBe(201);
      // The write's wait ran out: it is recorded as unsettled.
      const unsettled = await platform.database.pool.query(
        'SELECT count(*)::int AS n FROM api.unsettled_writes',
      );
      expect(unsettled.rows[0]).toEqual({ n: 1 });
      await until(
        'the record’s event parked',
        30_000,
        () => platform.database.pool.query('SELECT 1 FROM es.parked_events WHERE stream_id = $1', [stream]),
        (result) => (result.rowCount ?? 0) > 0,
      );
      // The organization reads on; the parked record shows no later change until an operator's retry.
      const read = await acme.request('GET', '/v2/people');
      expect(read.status).toBe(200);
      expect((await acme.request('GET', `/v2/people/${id}`)).status).toBe(404);
      const { rows } = await platform.database.pool.query(
        'SELECT count(*)::int AS n FROM api.unsettled_writes',
      );
      expect(rows[0]).toEqual({ n: 0 });
    } finally {
      await allow();
    }
  }, 120_000);

  it('does not hold the organization’s reads behind a stream a process manager appended to and the projector parked', async () => {
    // An adjustment's own event projects; the inventory record the inventory manager appends for it is
    // refused (every new inventory record, while the trigger stands), so the projector parks that.
    const allow = await refuseProjecting("NEW.stream_id LIKE 'inventory-%'");
    try {
      const sku = `P-${randomBytes(4).toString('hex')}`;
      const adjusted = await acme.request('POST', '/v2/inventory_adjustments', {
        body: { sku, warehouse: 'W', quantity_delta: 3, reason: 'count' },
      });
      expect(adjusted.status).toBe(201);
      await until(
        'the inventory record’s event parked',
        30_000,
        () =>
          platform.database.pool.query("SELECT 1 FROM es.parked_events WHERE stream_id LIKE 'inventory-%'"),
        (result) => (result.rowCount ?? 0) > 0,
      );
      // The organization reads on; the parked inventory record shows no change until an operator's retry.
      expect((await acme.request('GET', '/v2/people')).status).toBe(200);
      const { rows } = await platform.database.pool.query(
        'SELECT count(*)::int AS n FROM api.unsettled_writes',
      );
      expect(rows[0]).toEqual({ n: 0 });
    } finally {
      await allow();
    }
  }, 120_000);
});
