/**
 * The distributed shape on this machine, for end-to-end trials and demos: a real Kafka broker (or
 * cluster), a Postgres, and processes of every service (auth, api, projector, webhook-dispatcher),
 * until Ctrl-C.
 *
 *   npm run dev:distributed                                  one process per service, one broker
 *   npm run dev:distributed -- --replicas 2 --brokers 3      two of each behind local load balancers,
 *                                                            on a three-broker KRaft cluster
 *
 * Uses DATABASE_URL and KAFKA_BROKERS when set; otherwise starts the same embedded Postgres and local
 * Kafka broker as the tests (see docs/testing.md, "How tests find Postgres and Kafka").
 */
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { createLogger } from '@ofp/runtime';
import { startInfrastructure, startPlatform } from '@ofp/testing';

const { values: args } = parseArgs({
  options: { replicas: { type: 'string', default: '1' }, brokers: { type: 'string', default: '1' } },
});
const count = (name: 'replicas' | 'brokers'): number => {
  const value = Number(args[name]);
  if (Number.isInteger(value) && value >= 1) return value;
  console.error(`--${name}: must be a positive integer, not ${args[name]}`);
  process.exit(2);
};
const [replicas, brokers] = [count('replicas'), count('brokers')];

const logger = createLogger({ name: 'dev-distributed', level: 'info' });
const infrastructure = await startInfrastructure(logger, brokers);
const database = `dev_${randomUUID().slice(0, 8)}`;
const admin = new pg.Client({ connectionString: infrastructure.databaseUrl });
await admin.connect();
await admin.query(`CREATE DATABASE ${database}`);
const url = new URL(infrastructure.databaseUrl);
url.pathname = `/${database}`;

const platform = await startPlatform({
  databaseUrl: url.toString(),
  kafkaBrokers: infrastructure.kafkaBrokers,
  replicas,
  // Topics replicated as the cluster allows: three copies on three brokers or more.
  env: { KAFKA_REPLICATION_FACTOR: String(Math.min(3, infrastructure.kafkaBrokers.length)) },
  output: 'inherit',
});
const shape =
  replicas === 1
    ? 'one process per service'
    : `${replicas} processes per service, each service behind a load balancer`;
process.stdout.write(
  [
    '',
    `Distributed platform running (${shape}, ${infrastructure.kafkaBrokers.length} Kafka brokers):`,
    `  auth:          ${platform.authUrl}   (/oauth, /.well-known, /v2/authenticate)`,
    `  admin API:     ${platform.adminUrl}   (/admin: the auth service's ADMIN_PORT)`,
    `  api:           ${platform.apiUrl}   (/v2, /api/v2)`,
    `  webhooks:      ${platform.webhooksUrl}   (/v2/webhooks*, /v2/webhook_deliveries*, /v2/webhook_event_types)`,
    ...(replicas === 1
      ? []
      : [
          `  processes:     ${Object.entries(platform.processes)
            .map(([name, processUrl]) => `${name} ${processUrl}`)
            .join(', ')}`,
        ]),
    `  admin token:   ${platform.adminToken}`,
    `  KAFKA_BROKERS: ${infrastructure.kafkaBrokers.join(',')}`,
    `  DATABASE_URL:  ${url.toString()}`,
    'Create an organization and a client with orderctl:',
    `  npm run orderctl -- --url ${platform.adminUrl} --admin-token ${platform.adminToken} create-organization --name Acme`,
    'Ctrl-C stops everything.',
    '',
  ].join('\n'),
);

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    void (async () => {
      await platform.stop();
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      await admin.end();
      await infrastructure.stop();
      process.exit(0);
    })();
  });
}
