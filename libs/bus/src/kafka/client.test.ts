import { jest } from '@jest/globals';
import { Kafka } from 'kafkajs';
import { z } from 'zod';
import { StartupError } from '@ofp/runtime';
import {
  createKafkaClient,
  kafkaConfigShape,
  kafkaSettingsIssues,
  kafkaStartupError,
  SUSPECT_MS,
  type KafkaClient,
} from './client.js';

const parse = (env: Record<string, string>) => z.object(kafkaConfigShape).parse(env);

function client(env: Record<string, string>): KafkaClient {
  const settings = parse({ KAFKA_BROKERS: 'kafka-0:9093,kafka-1:9093', ...env });
  const config = { brokers: ['kafka-0:9093'] };
  return {
    kafka: new Kafka(config),
    config,
    settings,
    brokers: settings.KAFKA_BROKERS ?? [],
    timedOut: () => {},
  };
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
  const retriesExceeded = (cause: unknown) =>
    Object.assign(new Error('retries exceeded'), { name: 'KafkaJSNumberOfRetriesExceeded', cause });

  it('names the password setting when the broker refuses the credentials', () => {
    const refused = Object.assign(
      new Error('SASL SCRAM SHA512 authentication failed: Authentication failed'),
      {
        name: 'KafkaJSSASLAuthenticationError',
      },
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
      'KAFKA_SASL_PASSWORD_FILE: the Kafka cluster at kafka-0:9093,kafka-1:9093 refused user ofp-api with KAFKA_SASL_MECHANISM=scram-sha-512 (SASL SCRAM SHA512 authentication failed: Authentication failed); check KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD_FILE',
    );
  });

  it('names the CA setting when the broker certificate is not trusted, through kafkajs wrappers', () => {
    const untrusted = Object.assign(
      new Error('Connection error: self-signed certificate in certificate chain'),
      {
        name: 'KafkaJSConnectionError',
        code: 'SELF_SIGNED_CERT_IN_CHAIN',
      },
    );
    const error = kafkaStartupError(
      client({ KAFKA_SSL: 'true', KAFKA_SSL_CA_FILE: '/etc/ca.crt' }),
      retriesExceeded(untrusted),
    );
    expect(error.message).toBe(
      'KAFKA_SSL_CA_FILE=/etc/ca.crt: the certificate of the Kafka broker at kafka-0:9093,kafka-1:9093 is not trusted (SELF_SIGNED_CERT_IN_CHAIN); set KAFKA_SSL_CA_FILE to the CA that signed it',
    );
  });

  it('names the brokers otherwise, and suggests TLS when it is off', () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED'), {
      code: 'ECONNREFUSED',
      address: '10.0.0.1',
      port: 9093,
    });
    const error = kafkaStartupError(client({}), retriesExceeded(refused));
    expect(error.message).toBe(
      'KAFKA_BROKERS=kafka-0:9093,kafka-1:9093: cannot use the Kafka cluster: ECONNREFUSED 10.0.0.1:9093; if its listener uses TLS, set KAFKA_SSL=true',
    );
    expect(error.message).not.toContain('\n');
  });
});

describe('the bootstrap list', () => {
  it('puts a broker that left a request unanswered last, and only for a while', async () => {
    const { config, timedOut } = await createKafkaClient(
      parse({ KAFKA_BROKERS: 'kafka-0:9092,kafka-1:9092,kafka-2:9092' }),
      'test',
    );
    const bootstrap = config.brokers as () => string[];
    expect(bootstrap()).toEqual(['kafka-0:9092', 'kafka-1:9092', 'kafka-2:9092']);
    jest.useFakeTimers({ now: Date.now() });
    try {
      timedOut('kafka-0:9092');
      expect(bootstrap()).toEqual(['kafka-1:9092', 'kafka-2:9092', 'kafka-0:9092']);
      jest.advanceTimersByTime(SUSPECT_MS);
      expect(bootstrap()).toEqual(['kafka-0:9092', 'kafka-1:9092', 'kafka-2:9092']);
    } finally {
      jest.useRealTimers();
    }
  });
});
