// The lean baseline of `bench:webhooks`: a minimal Postgres queue worker, as a job queue library runs one
// (River's shape). Jobs wait in one narrow table, claimed in batches with `FOR UPDATE SKIP LOCKED`
// (`available` -> `running`), each POSTed to its URL signed the Standard Webhooks way (the
// `standardwebhooks` package), and completed in batches (`running` -> `completed`, or back to
// `available` a second later when the POST failed). No intake, fan-out, per-record order, attempt log,
// endpoint limits, SSRF guard, metrics or logs. The benchmark creates the table and fills it
// (`bench/webhooks.ts`); this process drains it.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { Agent, request } from 'undici';
import { leanReady, leanSetting } from '../lean.js';

/** Requests in flight at most. */
const CONCURRENCY = Number(leanSetting('CONCURRENCY'));
/** How long the worker waits before asking again after a claim found nothing. */
const IDLE_POLL_MS = 50;
/** How long finished jobs wait to be completed together (one statement per batch). */
const COMPLETION_BATCH_MS = 5;

const pool = new pg.Pool({ connectionString: leanSetting('DATABASE_URL'), max: 4 });
const signer = new Webhook(leanSetting('SECRET'));
const agent = new Agent({ connections: CONCURRENCY });

interface Job {
  readonly id: string;
  readonly url: string;
  readonly payload: string;
}

let inFlight = 0;
let completed: string[] = [];
let failed: string[] = [];
let flushing: NodeJS.Timeout | undefined;
/** Wakes the claiming loop when a request finished. */
let wake: (() => void) | undefined;

async function claim(count: number): Promise<Job[]> {
  const { rows } = await pool.query<Job>({
    name: 'lean-claim',
    text: `UPDATE lean_jobs SET state = 'running', attempt = attempt + 1, attempted_at = now()
            WHERE id IN (SELECT id FROM lean_jobs WHERE state = 'available' AND scheduled_at <= now()
                          ORDER BY scheduled_at, id LIMIT $1 FOR UPDATE SKIP LOCKED)
        RETURNING id, url, payload`,
    values: [count],
  });
  return rows;
}

async function flush(): Promise<void> {
  flushing = undefined;
  const [done, retry] = [completed, failed];
  [completed, failed] = [[], []];
  if (done.length > 0)
    await pool.query({
      name: 'lean-complete',
      text: `UPDATE lean_jobs SET state = 'completed', finalized_at = now() WHERE id = ANY($1::bigint[])`,
      values: [done],
    });
  if (retry.length > 0)
    await pool.query({
      name: 'lean-retry',
      text: `UPDATE lean_jobs SET state = 'available', scheduled_at = now() + interval '1 second'
              WHERE id = ANY($1::bigint[])`,
      values: [retry],
    });
}

/** POSTs a job's payload signed; whether its URL took it (2xx). */
async function post(job: Job): Promise<boolean> {
  const id = randomUUID();
  const at = new Date();
  const response = await request(job.url, {
    method: 'POST',
    dispatcher: agent,
    headers: {
      'content-type': 'application/json',
      'webhook-id': id,
      'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
      'webhook-signature': signer.sign(id, at, job.payload),
    },
    body: job.payload,
  });
  await response.body.dump();
  return response.statusCode >= 200 && response.statusCode < 300;
}

async function send(job: Job): Promise<void> {
  const ok = await post(job).catch(() => false);
  (ok ? completed : failed).push(job.id);
  inFlight--;
  wake?.();
  flushing ??= setTimeout(() => void flush(), COMPLETION_BATCH_MS);
}

async function work(): Promise<void> {
  for (;;) {
    const room = CONCURRENCY - inFlight;
    // Claims in batches of at least half the pool, as a library's producer does.
    if (room < CONCURRENCY / 2) {
      await new Promise<void>((resolve) => (wake = resolve));
      wake = undefined;
      continue;
    }
    const jobs = await claim(room);
    if (jobs.length === 0) {
      await new Promise((resolve) => setTimeout(resolve, IDLE_POLL_MS));
      continue;
    }
    inFlight += jobs.length;
    for (const job of jobs) void send(job);
  }
}

leanReady();
await work();
