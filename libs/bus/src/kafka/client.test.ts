import { z } from 'zod';
import { StartupError } from '@ofp/runtime';
import {
  createKafkaClient,
  kafkaClientConfig,
  kafkaConfigShape,
  kafkaSettingsIssues,
  kafkaStartupError,
  REQUEST_TIMEOUT_MS,
  type KafkaClient,
} from './client.js';
import { Kafka, logLevel } from './kafka-javascript.js';

const parse = (env: Record<string, string>) => z.object(kafkaConfigShape).parse(env);

function client(env: Record<string, string>): KafkaClient {
  const settings = parse({ KAFKA_BROKERS: 'kafka-0:9093,kafka-1:9093', ...env });
  const config = { kafkaJS: { brokers: ['kafka-0:9093'] } };
  return { kafka: new Kafka(config), config, settings, brokers: settings.KAFKA_BROKERS ?? [] };
}

describe('Kafka settings', () => {
  it('defaults to plaintext, no SASL, topics created', () => {
    const settings = parse({});
    expect(settings).toMatchObject({ KAFKA_SSL: false, KAFKA_CREATE_TOPICS: true });
    expect(kafkaSettingsIssues(settings)).toEqual([]);
  });

  it('accepts TLS with a client certificate and SCRAM with a password file', () => {
    const settings = parse({
      KAFKA_SSL: 'true',
      KAFKA_SSL_CA_FILE: '/etc/kafka/ca.crt',
      KAFKA_SSL_CERT_FILE: '/etc/kafka/user.crt',
      KAFKA_SSL_KEY_FILE: '/etc/kafka/user.key',
      KAFKA_SASL_MECHANISM: 'scram-sha-512',
      KAFKA_SASL_USERNAME: 'ofp-api',
      KAFKA_SASL_PASSWORD_FILE: '/etc/kafka/password',
      KAFKA_CREATE_TOPICS: 'false',
    });
    expect(kafkaSettingsIssues(settings)).toEqual([]);
  });

  it('refuses an unknown mechanism', () => {
    expect(() => parse({ KAFKA_SASL_MECHANISM: 'gssapi' })).toThrow();
  });

  it('names the setting of each combination that cannot work', () => {
    const issues = (env: Record<string, string>) =>
      kafkaSettingsIssues(parse(env)).map(({ setting, message }) => `${setting} ${message}`);
    expect(issues({ KAFKA_SSL_CA_FILE: '/ca' })).toEqual([
      'KAFKA_SSL_CA_FILE is set but KAFKA_SSL is not true',
    ]);
    expect(issues({ KAFKA_SSL: 'true', KAFKA_SSL_CERT_FILE: '/c' })).toEqual([
      'KAFKA_SSL_KEY_FILE is required with KAFKA_SSL_CERT_FILE',
    ]);
    expect(issues({ KAFKA_SASL_MECHANISM: 'plain' })).toEqual([
      'KAFKA_SASL_USERNAME is required with KAFKA_SASL_MECHANISM=plain',
      'KAFKA_SASL_PASSWORD (or KAFKA_SASL_PASSWORD_FILE) is required with KAFKA_SASL_MECHANISM=plain',
    ]);
    expect(
      issues({
        KAFKA_SASL_MECHANISM: 'plain',
        KAFKA_SASL_USERNAME: 'u',
        KAFKA_SASL_PASSWORD: 'p',
        KAFKA_SASL_PASSWORD_FILE: '/p',
      }),
    ).toEqual(['KAFKA_SASL_PASSWORD_FILE set either it or KAFKA_SASL_PASSWORD, not both']);
    expect(issues({ KAFKA_SASL_USERNAME: 'u' })).toEqual([
      'KAFKA_SASL_USERNAME is set but KAFKA_SASL_MECHANISM is not (plain, scram-sha-256, scram-sha-512)',
    ]);
  });
});

describe('a failed Kafka connection at start', () => {
  it('names the password setting when the broker refuses the credentials', () => {
    // As librdkafka reports it to the client's error callback.
    const refused = new Error(
      'sasl_ssl://kafka-0:9093/bootstrap: SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512 (after 312ms in state AUTH_REQ)',
    );
    const error = kafkaStartupError(
      client({
        KAFKA_SASL_MECHANISM: 'scram-sha-512',
        KAFKA_SASL_USERNAME: 'ofp-api',
        KAFKA_SASL_PASSWORD_FILE: '/p',
      }),
      refused,
    );
    expect(error).toBeInstanceOf(StartupError);
    expect(error.message).toBe(
      `KAFKA_SASL_PASSWORD_FILE: the Kafka cluster at kafka-0:9093,kafka-1:9093 refused user ofp-api with KAFKA_SASL_MECHANISM=scram-sha-512 (${refused.message}); check KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD_FILE`,
    );
  });

  it('names the CA setting when the broker certificate is not trusted', () => {
    const untrusted = new Error(
      "ssl://kafka-0:9093/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified, verify that ssl.ca.location is correctly configured or root CA certificates are installed (add broker's CA certificate to the trusted certificate store) (after 14ms in state SSL_HANDSHAKE)",
    );
    const error = kafkaStartupError(
      client({ KAFKA_SSL: 'true', KAFKA_SSL_CA_FILE: '/etc/ca.crt' }),
      untrusted,
    );
    expect(error.message).toBe(
      'KAFKA_SSL_CA_FILE=/etc/ca.crt: the certificate of the Kafka broker at kafka-0:9093,kafka-1:9093 is not trusted (certificate verify failed); set KAFKA_SSL_CA_FILE to the CA that signed it',
    );
  });

  it('names the brokers otherwise, on one line, and suggests TLS when it is off', () => {
    const timedOut = new Error('Local: Timed out\nwhile listing topics');
    const error = kafkaStartupError(client({}), timedOut);
    expect(error.message).toBe(
      'KAFKA_BROKERS=kafka-0:9093,kafka-1:9093: cannot use the Kafka cluster: Local: Timed out while listing topics; if its listener uses TLS, set KAFKA_SSL=true',
    );
  });
});

describe('the client', () => {
  it('gives up on an unanswered request after 10 s and carries the TLS and SASL settings to librdkafka', async () => {
    const { config } = await createKafkaClient(
      parse({
        KAFKA_BROKERS: 'kafka-0:9093',
        KAFKA_SSL: 'true',
        KAFKA_SASL_MECHANISM: 'scram-sha-256',
        KAFKA_SASL_USERNAME: 'ofp',
        KAFKA_SASL_PASSWORD: 'secret',
      }),
      'test',
    );
    expect(config.kafkaJS).toMatchObject({
      brokers: ['kafka-0:9093'],
      requestTimeout: REQUEST_TIMEOUT_MS,
      ssl: true,
      sasl: { mechanism: 'scram-sha-256', username: 'ofp', password: 'secret' },
    });
    expect(REQUEST_TIMEOUT_MS).toBe(10_000);
    // Connections to every broker, each reconnected after the backoff (RDKAFKA_SETTINGS).
    expect(config).toMatchObject({ 'enable.sparse.connections': false });
  });

  it('is built from the settings the tests, benchmarks and chaos run build their own clients from', () => {
    expect(kafkaClientConfig(['kafka-0:9093'], 'test')).toEqual({
      'enable.sparse.connections': false,
      kafkaJS: {
        clientId: 'test',
        brokers: ['kafka-0:9093'],
        requestTimeout: REQUEST_TIMEOUT_MS,
        logLevel: logLevel.NOTHING,
      },
    });
  });
});
