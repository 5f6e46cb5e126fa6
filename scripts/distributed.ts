/**
 * The distributed shape on this machine, for end-to-end trials and demos: a real Kafka broker, a
 * Postgres, and one process per service (auth, api, projector, webhook-dispatcher), until Ctrl-C.
 *
 *   npm run dev:distributed
 *
 * Uses DATABASE_URL and KAFKA_BROKERS when set; otherwise starts the same embedded Postgres and local
 * Kafka broker as the tests (see README, "How tests find Postgres and Kafka").
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { createLogger } from '@ofp/runtime';
import { startInfrastructure, startPlatform } from '@ofp/testing';

const logger = createLogger({ name: 'dev-distributed', level: 'info' });
const infrastructure = await startInfrastructure(logger);
const database = `dev_${randomUUID().slice(0, 8)}`;
const admin = new pg.Client({ connectionString: infrastructure.databaseUrl });
await admin.connect();
await admin.query(`CREATE DATABASE ${database}`);
const url = new URL(infrastructure.databaseUrl);
url.pathname = `/${database}`;

const platform = await startPlatform({
  databaseUrl: url.toString(),
  kafkaBrokers: infrastructure.kafkaBrokers,
  output: 'inherit',
});
process.stdout.write(
  [
    '',
    'Distributed platform running (one process per service):',
    `  auth:          ${platform.authUrl}   (/oauth, /.well-known, /v2/authenticate)`,
    `  admin API:     ${platform.adminUrl}   (/admin: the auth service's ADMIN_PORT)`,
    `  api:           ${platform.apiUrl}   (/v2, /api/v2)`,
    `  webhooks:      ${platform.webhooksUrl}   (/v2/webhooks*, /v2/webhook_deliveries*, /v2/webhook_event_types)`,
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
