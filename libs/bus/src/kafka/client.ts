import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createSecureContext } from 'node:tls';
import { Kafka, logLevel, type KafkaConfig, type SASLOptions } from 'kafkajs';
import { z } from 'zod';
import { StartupError, describeError, env } from '@ofp/runtime';

export const SASL_MECHANISMS = ['plain', 'scram-sha-256', 'scram-sha-512'] as const;

/**
 * How a process reaches Kafka (docs/configuration.md): the bootstrap servers, TLS with a CA and a
 * client certificate read from files (so that a chart mounts Secrets), SASL PLAIN or SCRAM, and whether
 * the topics are created at run time or must have been provisioned (KafkaTopic resources, Terraform).
 */
export const kafkaConfigShape = {
  KAFKA_BROKERS: env.list().optional().meta({
    description:
      'comma-separated bootstrap servers; selects the Kafka bus (required for api, projector, webhook-dispatcher)',
  }),
  KAFKA_CLIENT_ID: z.string().default('ofp').meta({ description: 'the Kafka client id' }),
  KAFKA_TOPIC_PREFIX: z.string().default('ofp.events.').meta({
    description: 'topics are `<prefix><stream type>` (`ofp.events.people`), created when missing',
  }),
  KAFKA_TOPIC_PARTITIONS: env.positiveInt(6).meta({ description: 'partitions of the topics it creates' }),
  KAFKA_REPLICATION_FACTOR: env
    .positiveInt(1)
    .meta({ description: 'replication factor of the topics it creates' }),
  KAFKA_CREATE_TOPICS: env.boolean(true).meta({
    description:
      "`false`: the topics were provisioned (the chart's `KafkaTopic` resources, Terraform) and the process needs no CREATE ACL; it checks at start that every topic exists and stops with one line naming the missing ones",
  }),
  /**
   * kafkajs heartbeats between batches, so the session must be longer than the slowest batch. The
   * brokers' bounds by default: 6 s to 30 min.
   */
  KAFKA_SESSION_TIMEOUT_MS: z.coerce.number().int().min(6_000).max(1_800_000).default(30_000).meta({
    description:
      'how long a consumer may miss heartbeats before its group gives its partitions to the other replicas: the wait after a replica dies or freezes ([chaos](chaos.md)). Longer than the slowest batch (heartbeats come between batches); 6000 to 1800000',
  }),
  KAFKA_SSL: env.boolean(false).meta({ description: 'connect with TLS' }),
  KAFKA_SSL_CA_FILE: z.string().min(1).optional().meta({
    description: "PEM file of the CA that signed the brokers' certificates",
    whenUnset: "the system's CAs",
  }),
  KAFKA_SSL_CERT_FILE: z.string().min(1).optional().meta({
    description:
      'PEM client certificate, for listeners that authenticate clients by TLS (Strimzi `tls` users: `user.crt`)',
  }),
  KAFKA_SSL_KEY_FILE: z
    .string()
    .min(1)
    .optional()
    .meta({ description: "the client certificate's PEM key (Strimzi: `user.key`)" }),
  KAFKA_SASL_MECHANISM: z
    .enum(SASL_MECHANISMS)
    .optional()
    .meta({ description: SASL_MECHANISMS.map((m) => `\`${m}\``).join(', ') }),
  KAFKA_SASL_USERNAME: z.string().min(1).optional().meta({ description: 'SASL user name' }),
  KAFKA_SASL_PASSWORD: z.string().min(1).optional().meta({ description: 'SASL password' }),
  KAFKA_SASL_PASSWORD_FILE: z.string().min(1).optional().meta({
    description:
      'the SASL password from a file instead (a mounted Secret; one trailing line break is ignored)',
  }),
};

export type KafkaSettings = Readonly<z.infer<z.ZodObject<typeof kafkaConfigShape>>>;

/** The combinations of Kafka settings that cannot work, each as an issue on the setting to fix. */
export function kafkaSettingsIssues(settings: KafkaSettings): { setting: string; message: string }[] {
  const issues: { setting: string; message: string }[] = [];
  for (const file of ['KAFKA_SSL_CA_FILE', 'KAFKA_SSL_CERT_FILE', 'KAFKA_SSL_KEY_FILE'] as const) {
    if (settings[file] && !settings.KAFKA_SSL)
      issues.push({ setting: file, message: 'is set but KAFKA_SSL is not true' });
  }
  if (settings.KAFKA_SSL_CERT_FILE && !settings.KAFKA_SSL_KEY_FILE)
    issues.push({ setting: 'KAFKA_SSL_KEY_FILE', message: 'is required with KAFKA_SSL_CERT_FILE' });
  if (settings.KAFKA_SSL_KEY_FILE && !settings.KAFKA_SSL_CERT_FILE)
    issues.push({ setting: 'KAFKA_SSL_CERT_FILE', message: 'is required with KAFKA_SSL_KEY_FILE' });
  if (settings.KAFKA_SASL_PASSWORD && settings.KAFKA_SASL_PASSWORD_FILE)
    issues.push({
      setting: 'KAFKA_SASL_PASSWORD_FILE',
      message: 'set either it or KAFKA_SASL_PASSWORD, not both',
    });
  if (settings.KAFKA_SASL_MECHANISM) {
    const needs = `is required with KAFKA_SASL_MECHANISM=${settings.KAFKA_SASL_MECHANISM}`;
    if (!settings.KAFKA_SASL_USERNAME) issues.push({ setting: 'KAFKA_SASL_USERNAME', message: needs });
    if (!settings.KAFKA_SASL_PASSWORD && !settings.KAFKA_SASL_PASSWORD_FILE)
      issues.push({ setting: 'KAFKA_SASL_PASSWORD', message: `(or KAFKA_SASL_PASSWORD_FILE) ${needs}` });
  } else {
    for (const setting of ['KAFKA_SASL_USERNAME', 'KAFKA_SASL_PASSWORD', 'KAFKA_SASL_PASSWORD_FILE'] as const)
      if (settings[setting])
        issues.push({
          setting,
          message: 'is set but KAFKA_SASL_MECHANISM is not (plain, scram-sha-256, scram-sha-512)',
        });
  }
  return issues;
}

/** A Kafka client and what start-up checks need to name the settings behind a failure. */
export interface KafkaClient {
  readonly kafka: Kafka;
  readonly config: KafkaConfig;
  readonly settings: KafkaSettings;
  readonly brokers: readonly string[];
  /**
   * Reports a broker that left a request unanswered (kafkajs's REQUEST_TIMEOUT): new connections of
   * this client bootstrap from the other brokers first for {@link SUSPECT_MS}.
   */
  timedOut(broker: string): void;
}

/** How long a broker that left a request unanswered goes last in the bootstrap list. */
export const SUSPECT_MS = 120_000;

/**
 * The kafkajs client of a process, its TLS material and SASL password read from their files now:
 * a file that cannot be read, or PEM that does not parse, is a one-line {@link StartupError} naming
 * the setting.
 */
export async function createKafkaClient(settings: KafkaSettings, clientId: string): Promise<KafkaClient> {
  const brokers = settings.KAFKA_BROKERS ?? [];
  // kafkajs bootstraps every new consumer, producer and admin from the first broker of the list. A
  // broker that hangs (its connections open, its answers never coming) there would make each of them
  // wait out a request timeout before trying the next one.
  const timedOutAt = new Map<string, number>();
  const suspect = (broker: string) => Date.now() - (timedOutAt.get(broker) ?? -Infinity) < SUSPECT_MS;
  const bootstrap = () => [...brokers.filter((b) => !suspect(b)), ...brokers.filter(suspect)];
  const config: KafkaConfig = { clientId, brokers: bootstrap, logLevel: logLevel.WARN };
  if (settings.KAFKA_SSL) config.ssl = await tlsMaterial(settings);
  if (settings.KAFKA_SASL_MECHANISM) {
    const password =
      settings.KAFKA_SASL_PASSWORD ??
      // A Secret written with `echo` ends with a line break that is no part of the password.
      (await readSetting('KAFKA_SASL_PASSWORD_FILE', settings.KAFKA_SASL_PASSWORD_FILE!)).replace(
        /\r?\n$/,
        '',
      );
    config.sasl = {
      mechanism: settings.KAFKA_SASL_MECHANISM,
      username: settings.KAFKA_SASL_USERNAME!,
      password,
    } as SASLOptions;
  }
  return {
    kafka: new Kafka(config),
    config,
    settings,
    brokers,
    timedOut: (broker) => void timedOutAt.set(broker, Date.now()),
  };
}

async function readSetting(setting: string, path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    throw new StartupError(
      `${setting}=${path}: cannot read it (${(error as NodeJS.ErrnoException).code ?? describeError(error)}); mount the file or fix the path`,
    );
  }
}

type FileSetting = 'KAFKA_SSL_CA_FILE' | 'KAFKA_SSL_CERT_FILE' | 'KAFKA_SSL_KEY_FILE';

/** The CA, client certificate and key from their files, each parsed so that a bad one is named now. */
async function tlsMaterial(settings: KafkaSettings): Promise<{ ca?: string; cert?: string; key?: string }> {
  const read = async (setting: FileSetting, parse: (pem: string) => unknown, what: string) => {
    const path = settings[setting];
    if (!path) return undefined;
    const pem = await readSetting(setting, path);
    try {
      parse(pem);
    } catch (error) {
      throw new StartupError(`${setting}=${path}: is not ${what} (${describeError(error)})`);
    }
    return pem;
  };
  const ca = await read('KAFKA_SSL_CA_FILE', (pem) => new X509Certificate(pem), 'a PEM certificate');
  const cert = await read('KAFKA_SSL_CERT_FILE', (pem) => new X509Certificate(pem), 'a PEM certificate');
  const key = await read('KAFKA_SSL_KEY_FILE', (pem) => createPrivateKey(pem), 'a PEM private key');
  if (cert && key) {
    try {
      createSecureContext({ cert, key });
    } catch (error) {
      throw new StartupError(
        `KAFKA_SSL_KEY_FILE=${settings.KAFKA_SSL_KEY_FILE}: is not the key of the certificate in KAFKA_SSL_CERT_FILE (${describeError(error)})`,
      );
    }
  }
  return { ...(ca ? { ca } : {}), ...(cert && key ? { cert, key } : {}) };
}

/** TLS verification failures (Node's codes) that mean "the broker's certificate is not trusted". */
const UNTRUSTED_CERTIFICATE = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'ERR_TLS_CERT_ALTNAME_INVALID',
]);

/**
 * Connects to the cluster once before anything starts and checks that the topics this process uses
 * exist when it may not create them: a wrong password, an untrusted broker certificate, an unreachable
 * cluster or missing topics are each a one-line {@link StartupError} naming the setting to change.
 */
export async function checkKafka(client: KafkaClient, topics: readonly string[]): Promise<void> {
  const { settings } = client;
  // A client of its own: quiet (the failure is reported as one line) and quick to give up.
  const quiet = new Kafka({ ...client.config, logLevel: logLevel.NOTHING, retry: { retries: 2 } });
  const admin = quiet.admin();
  let existing: Set<string>;
  try {
    await admin.connect();
    existing = new Set(await admin.listTopics());
  } catch (error) {
    throw kafkaStartupError(client, error);
  } finally {
    await admin.disconnect().catch(() => {});
  }
  if (settings.KAFKA_CREATE_TOPICS) return;
  const missing = topics.filter((topic) => !existing.has(topic));
  if (missing.length > 0) {
    throw new StartupError(
      `KAFKA_CREATE_TOPICS=false: ${missing.length} topic${missing.length === 1 ? ' is' : 's are'} missing on ${client.brokers.join(',')}: ${missing.join(', ')}; create them (the chart's KafkaTopic resources) or set KAFKA_CREATE_TOPICS=true`,
    );
  }
}

/** The one line that says which Kafka setting a connection failure points at. */
export function kafkaStartupError(client: KafkaClient, error: unknown): StartupError {
  const { settings } = client;
  const where = client.brokers.join(',');
  for (let cause: unknown = error; cause; cause = (cause as { cause?: unknown }).cause) {
    const { name, code, message } = cause as { name?: unknown; code?: unknown; message?: unknown };
    if (name === 'KafkaJSSASLAuthenticationError') {
      const password = settings.KAFKA_SASL_PASSWORD_FILE ? 'KAFKA_SASL_PASSWORD_FILE' : 'KAFKA_SASL_PASSWORD';
      return new StartupError(
        `${password}: the Kafka cluster at ${where} refused user ${settings.KAFKA_SASL_USERNAME ?? '(none)'} with KAFKA_SASL_MECHANISM=${settings.KAFKA_SASL_MECHANISM ?? '(none)'} (${String(message)}); check KAFKA_SASL_USERNAME and ${password}`,
      );
    }
    if (typeof code === 'string' && UNTRUSTED_CERTIFICATE.has(code)) {
      const ca = settings.KAFKA_SSL_CA_FILE
        ? `KAFKA_SSL_CA_FILE=${settings.KAFKA_SSL_CA_FILE}`
        : 'KAFKA_SSL_CA_FILE';
      return new StartupError(
        `${ca}: the certificate of the Kafka broker at ${where} is not trusted (${code}); set KAFKA_SSL_CA_FILE to the CA that signed it`,
      );
    }
  }
  const hint = settings.KAFKA_SSL ? '' : '; if its listener uses TLS, set KAFKA_SSL=true';
  return new StartupError(
    `KAFKA_BROKERS=${where}: cannot use the Kafka cluster: ${describeError(error)}${hint}`,
  );
}
