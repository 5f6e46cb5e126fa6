// The lean baseline of `bench:writes`: a write at the least. A `node:http` server and a `pg` pool of the
// platform's size; the JSON body read and parsed, one event appended to a new stream with the event
// store library (the raw append), and the record written back with 201. No token, rate limit,
// validation, idempotency, read-your-writes wait, router, metrics or logs: `POST /v2/<model>`.
import { randomUUID } from 'node:crypto';
import { EventStore } from '@ofp/event-store';
import { createPool } from '@ofp/runtime';
import { leanSetting, serveLean } from '../lean.js';

// The platform's pool settings (the event store library takes its pool type).
const pool = createPool({
  connectionString: leanSetting('DATABASE_URL'),
  max: Number(leanSetting('POOL_SIZE')),
  applicationName: 'lean-append',
});
const orgId = Number(leanSetting('ORG_ID'));
const store = new EventStore(pool, { outbox: false });
let nextId = 0;

serveLean(async (req, res) => {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const fields = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
  const eventId = randomUUID();
  const at = new Date().toISOString();
  const record = { ...fields, id: ++nextId, created_at: at, updated_at: at, version: 1 };
  await store.append({
    streamId: `lean-${eventId}`,
    streamType: 'lean',
    expectedVersion: 0,
    orgId,
    events: [{ eventId, type: 'lean.created', data: { record } }],
  });
  const body = JSON.stringify({ count: 1, results: record, errors: null });
  res.writeHead(201, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
});
