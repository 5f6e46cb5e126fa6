import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Kafka, ensureTopics, kafkaClientConfig, topicOf } from '@ofp/bus';
import {
  CACHE_DIR,
  createCertificateAuthority,
  createIntegrator,
  createTestDatabase,
  runToExit,
  spawnStandalone,
  startKafkaBroker,
  startPlatform,
  startWebhookReceiver,
  testLogger,
  type RunningKafka,
  type RunningPlatform,
  type SecureListener,
  type TestDatabase,
  type WebhookReceiver,
  waitUntil,
  testSecretsKeyFile,
} from '@ofp/testing';
import { platformStreamTypes } from './streams.js';

/**
 * Managed Kafka (MSK, Confluent Cloud, Aiven, Strimzi) as platform teams run it: a SASL_SSL listener
 * with a private CA, SCRAM credentials, topics provisioned beforehand and no CREATE right. The
 * distributed platform runs its scenario over it once; the mistakes a person makes in those settings
 * stop a process at start with one line naming the setting.
 */

let kafka: RunningKafka;
let secure: SecureListener;
let database: TestDatabase;

/** The settings a chart renders for a SCRAM user with a client certificate and provisioned topics. */
function secureSettings(prefix: string, overrides: Record<string, string> = {}): Record<string, string> {
  return {
    KAFKA_BROKERS: secure.brokers.join(','),
    KAFKA_TOPIC_PREFIX: prefix,
    KAFKA_CREATE_TOPICS: 'false',
    KAFKA_SSL: 'true',
    KAFKA_SSL_CA_FILE: secure.caFile,
    KAFKA_SSL_CERT_FILE: secure.clientCertFile,
    KAFKA_SSL_KEY_FILE: secure.clientKeyFile,
    KAFKA_SASL_MECHANISM: 'scram-sha-512',
    KAFKA_SASL_USERNAME: secure.username,
    KAFKA_SASL_PASSWORD_FILE: join(kafkaDir(), 'password'),
    ...overrides,
  };
}

function kafkaDir(): string {
  return join(secure.caFile, '..');
}

/** Creates the platform's topics as a KafkaTopic operator would, on the broker's plaintext listener. */
async function provisionTopics(prefix: string): Promise<void> {
  const settings = { prefix, partitions: 2, replicationFactor: 1, create: true };
  await ensureTopics(
    new Kafka(kafkaClientConfig(kafka.brokers, 'kafka-sasl-ssl-test')),
    settings,
    platformStreamTypes().map((streamType) => topicOf(settings, streamType)),
    testLogger('kafka-sasl-ssl'),
  );
}

beforeAll(async () => {
  kafka = await startKafkaBroker({
    cacheDir: CACHE_DIR,
    logger: testLogger('kafka-sasl-ssl'),
    saslSsl: true,
  });
  secure = kafka.secure!;
  await writeFile(join(kafkaDir(), 'password'), `${secure.password}\n`, { mode: 0o600 });
  database = await createTestDatabase();
}, 180_000);

afterAll(async () => {
  await database?.drop();
  await kafka?.stop();
}, 60_000);

describe('the distributed platform over SASL_SSL with provisioned topics', () => {
  let platform: RunningPlatform;
  let receiver: WebhookReceiver;
  let secret = '';

  beforeAll(async () => {
    const prefix = `secure.${randomBytes(4).toString('hex')}.`;
    await provisionTopics(prefix);
    receiver = await startWebhookReceiver({ secrets: () => [secret] });
    // The run's plaintext broker is not given: every process reaches Kafka through SASL_SSL alone.
    const { KAFKA_BROKERS: brokers, ...env } = secureSettings(prefix);
    platform = await startPlatform({
      databaseUrl: database.url,
      kafkaBrokers: brokers!.split(','),
      env: { ...env, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' },
    });
  }, 180_000);

  afterAll(async () => {
    await platform?.stop();
    await receiver?.close();
  }, 60_000);

  it('writes, projects, derives inventory, delivers webhooks and spreads revocations through Kafka', async () => {
    const integrator = await createIntegrator(platform, { name: 'Secure Kafka' });
    const webhook = await integrator.request<{ secret: string }>('POST', '/v2/webhooks', {
      body: { url: receiver.url, events: ['person.created'] },
    });
    expect(webhook.status).toBe(201);
    secret = webhook.body.results.secret;

    // The projector reads the record's event from Kafka before the write answers (read-your-writes).
    const person = await integrator.request<{ id: number }>('POST', '/v2/people', {
      body: { first_name: 'Grace', last_name: 'Hopper' },
    });
    expect(person.status).toBe(201);
    const read = await integrator.request<{ last_name: string }>(
      'GET',
      `/v2/people/${person.body.results.id}`,
    );
    expect(read).toMatchObject({ status: 200, body: { results: { last_name: 'Hopper' } } });

    // The inventory process manager (in the api) reads the adjustment from Kafka and appends the stock.
    const sku = `SKU-${randomBytes(3).toString('hex')}`;
    expect(
      (
        await integrator.request('POST', '/v2/inventory_adjustments', {
          body: { sku, warehouse: 'MAIN', quantity_delta: 7, reason: 'count' },
        })
      ).status,
    ).toBe(201);
    const q = encodeURIComponent(
      JSON.stringify({ filters: [{ operand: 'sku', operator: '=', value: sku }] }),
    );
    await eventually(async () => {
      const stock = await integrator.request<{ on_hand: number }[]>('GET', `/v2/inventory?q=${q}`);
      expect(stock.body.results).toEqual([expect.objectContaining({ on_hand: 7 })]);
    });

    // The dispatcher reads the person's event from Kafka and delivers it, signed.
    await receiver.waitFor((received) => received.some((r) => r.payload?.type === 'person.created'), 30_000);
    expect(receiver.received.find((r) => r.payload?.type === 'person.created')?.verified).toBe(true);

    // The revocation travels from auth's outbox through the relay to the api's deny-list.
    const revoked = await fetch(`${platform.authUrl}/oauth/revoke`, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from(`${integrator.clientId}:${integrator.clientSecret}`).toString('base64')}`,
      },
      body: new URLSearchParams({ token: integrator.accessToken }),
    });
    expect(revoked.status).toBe(200);
    await eventually(
      async () => expect((await integrator.request('GET', '/v2/people')).status).toBe(401),
      5_000,
    );
  }, 120_000);
});

describe('a mistake in the Kafka settings stops the start with one line naming the setting', () => {
  it.each([
    {
      name: 'a wrong password',
      change: (env: Record<string, string>) => {
        delete env.KAFKA_SASL_PASSWORD_FILE;
        env.KAFKA_SASL_PASSWORD = 'not-the-password';
      },
      message: () =>
        `^KAFKA_SASL_PASSWORD: the Kafka cluster at ${secure.brokers[0]} refused user ofp with KAFKA_SASL_MECHANISM=scram-sha-512 \\([^\\n]*SASL authentication error: Authentication failed[^\\n]*SCRAM-SHA-512[^\\n]*\\); check KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD$`,
    },
    {
      name: 'a CA that did not sign the broker certificate',
      change: (env: Record<string, string>) => {
        env.KAFKA_SSL_CA_FILE = join(kafkaDir(), 'other-ca.crt');
      },
      message: () =>
        `^KAFKA_SSL_CA_FILE=${join(kafkaDir(), 'other-ca.crt')}: the certificate of the Kafka broker at ${secure.brokers[0]} is not trusted \\(certificate verify failed\\); set KAFKA_SSL_CA_FILE to the CA that signed it$`,
    },
  ])(
    '$name',
    async ({ change, message }) => {
      await writeFile(join(kafkaDir(), 'other-ca.crt'), createCertificateAuthority('another CA').cert);
      const env = { TARGET: 'projector', DATABASE_URL: database.url, ...secureSettings('any.') };
      change(env);
      const result = await runToExit({ env, timeoutMs: 60_000 });
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr.split('\n')).toHaveLength(2);
      expect(result.stderr.trimEnd()).toMatch(new RegExp(message()));
    },
    60_000,
  );

  it('KAFKA_CREATE_TOPICS=false names the missing topics; once they exist, the same process starts', async () => {
    const prefix = `provisioned.${randomBytes(4).toString('hex')}.`;
    const env = {
      TARGET: 'webhook-dispatcher',
      DATABASE_URL: database.url,
      AUTH_URL: 'http://127.0.0.1:1',
      SECRETS_KEY_FILE: testSecretsKeyFile(),
      ...secureSettings(prefix),
    };
    const missing = await runToExit({ env, timeoutMs: 60_000 });
    expect(missing.code).toBe(1);
    const topics = platformStreamTypes().map((t) => `${prefix}${t}`);
    expect(missing.stderr).toBe(
      `KAFKA_CREATE_TOPICS=false: ${topics.length} topics are missing on ${secure.brokers[0]}: ${topics.join(', ')}; create them (the chart's KafkaTopic resources) or set KAFKA_CREATE_TOPICS=true\n`,
    );

    await provisionTopics(prefix);
    const started = await spawnStandalone({ env });
    try {
      await waitUntil(started.url, 200, started, 60_000);
    } finally {
      await started.stop();
    }
  }, 180_000);
});

async function eventually(check: () => Promise<void>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}
