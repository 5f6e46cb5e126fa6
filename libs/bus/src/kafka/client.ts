import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { createSecureContext } from 'node:tls';
import { z } from 'zod';
import { StartupError, describeError, env, type Logger } from '@ofp/runtime';
import {
  Kafka,
  kafkaLogger,
  logLevel,
  type Admin,
  type CommonConstructorConfig,
  type Consumer,
  type Producer,
} from './kafka-javascript.js';
import type { KafkaStatistics } from './statistics.js';

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
   * librdkafka heartbeats from a thread of its own, whatever the handlers do. The brokers' bounds by
   * default: 6 s to 30 min.
   */
  KAFKA_SESSION_TIMEOUT_MS: z.coerce.number().int().min(6_000).max(1_800_000).default(30_000).meta({
    description:
      'how long a consumer may miss heartbeats before its group gives its partitions to the other replicas: the wait after a replica dies or freezes ([chaos](chaos.md)), and the time a restarted replica with the same `KAFKA_GROUP_INSTANCE_ID` has to take its partitions back with no rebalance; 6000 to 1800000',
  }),
  KAFKA_GROUP_INSTANCE_ID: z
    .string()
    .regex(/^[A-Za-z0-9._-]{1,200}$/, 'letters, digits, ".", "_" and "-", at most 200')
    .optional()
    .meta({
      description:
        "this replica's stable name in its consumer groups (static membership, KIP-345): a replica that comes back under it within `KAFKA_SESSION_TIMEOUT_MS` takes its partitions back with no rebalance of the others. Unique per replica of a service, kept across its restarts (the chart: the pod's name)",
      whenUnset: 'dynamic membership: every start joins as a new member, and the group rebalances',
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
  /** What `kafka` was made with: librdkafka's settings, and the KafkaJS-compatible ones in `kafkaJS`. */
  readonly config: CommonConstructorConfig;
  readonly settings: KafkaSettings;
  readonly brokers: readonly string[];
}

/**
 * How long a request may go unanswered before librdkafka gives up on it and its connection (and asks
 * another broker for what it needs): a broker that hangs (a long pause, a host cut off) is left
 * within seconds rather than kafkajs's 30.
 */
export const REQUEST_TIMEOUT_MS = 10_000;

/**
 * librdkafka's settings beside the KafkaJS layer's, for every client of a process.
 *
 * `enable.sparse.connections` off: each client keeps a connection to every broker, and one that drops
 * is made again after librdkafka's reconnect backoff (100 ms, doubling to 10 s). With sparse
 * connections (librdkafka's default), a client connects to a broker only when a request needs it, and
 * a request waiting for a broker that is down (an admin request for the controller or a partition's
 * leader, which the offsets of the lag and the watchdog are) asks for a connection again at every
 * change of any broker's state, past the backoff (librdkafka 2.15, rd_kafka_broker_find_by_nodeid0 and
 * the admin worker's wait): in the chaos run every process of the platform connected to a killed
 * broker hundreds to thousands of times a second (one admin client reading offsets once a second:
 * 1,300 a second), at a load of 60 to 80 on two cores, and the broker took 70 s to come back instead
 * of 9 (docs/kafka.md, "Reconnection storms"). A few connections per client and broker are the price.
 */
const RDKAFKA_SETTINGS = { 'enable.sparse.connections': false } as const;

/**
 * The settings of every Kafka client the platform makes, before TLS and SASL: librdkafka's
 * ({@link RDKAFKA_SETTINGS}) beside the KafkaJS layer's (the bootstrap `brokers`, `clientId`,
 * {@link REQUEST_TIMEOUT_MS}), librdkafka's warnings and errors to `logger`, or nothing logged. The
 * tests, benchmarks and the chaos run build their own clients from it, so that theirs are the
 * platform's and not librdkafka's defaults (sparse connections, KafkaJS's 30 s request timeout).
 */
export function kafkaClientConfig(
  brokers: readonly string[],
  clientId: string,
  logger?: Logger,
): CommonConstructorConfig & { kafkaJS: NonNullable<CommonConstructorConfig['kafkaJS']> } {
  return {
    ...RDKAFKA_SETTINGS,
    kafkaJS: {
      clientId,
      brokers: [...brokers],
      requestTimeout: REQUEST_TIMEOUT_MS,
      logLevel: logger ? logLevel.WARN : logLevel.NOTHING,
      ...(logger ? { logger: kafkaLogger(logger.child({ kafka: clientId })) } : {}),
    },
  };
}

/**
 * The Kafka client of a process (@confluentinc/kafka-javascript through its KafkaJS-compatible API, on
 * librdkafka, {@link kafkaClientConfig}), its TLS material and SASL password read from their files now:
 * a file that cannot be read, or PEM that does not parse, is a one-line {@link StartupError} naming the
 * setting. librdkafka's own log lines go to `logger`, warnings and errors only, and every client it
 * makes reports librdkafka's statistics to `statistics` (the process's `kafka_client_*` metrics).
 */
export async function createKafkaClient(
  settings: KafkaSettings,
  clientId: string,
  logger?: Logger,
  statistics?: KafkaStatistics,
): Promise<KafkaClient> {
  const brokers = settings.KAFKA_BROKERS ?? [];
  const config = kafkaClientConfig(brokers, clientId, logger);
  config.kafkaJS.ssl = settings.KAFKA_SSL;
  if (settings.KAFKA_SSL) Object.assign(config, await tlsMaterial(settings));
  if (settings.KAFKA_SASL_MECHANISM) {
    const password =
      settings.KAFKA_SASL_PASSWORD ??
      // A Secret written with `echo` ends with a line break that is no part of the password.
      (await readSetting('KAFKA_SASL_PASSWORD_FILE', settings.KAFKA_SASL_PASSWORD_FILE!)).replace(
        /\r?\n$/,
        '',
      );
    config.kafkaJS.sasl = {
      mechanism: settings.KAFKA_SASL_MECHANISM,
      username: settings.KAFKA_SASL_USERNAME!,
      password,
    };
  }
  const kafka = statistics ? new ObservedKafka(config, statistics) : new Kafka(config);
  return { kafka, config, settings, brokers };
}

/** A Kafka whose producers, consumers and admin clients report librdkafka's statistics, each as what it is. */
class ObservedKafka extends Kafka {
  constructor(
    config: CommonConstructorConfig,
    private readonly statistics: KafkaStatistics,
  ) {
    super(config);
  }

  override producer(...[config]: Parameters<Kafka['producer']>): Producer {
    return super.producer({ ...config, ...this.statistics.clientConfig('producer') });
  }

  override consumer(...[config]: Parameters<Kafka['consumer']>): Consumer {
    return super.consumer({ ...config, ...this.statistics.clientConfig('consumer') });
  }

  override admin(...[config]: Parameters<Kafka['admin']>): Admin {
    return super.admin({ ...config, ...this.statistics.clientConfig('admin') });
  }
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

/**
 * The CA, client certificate and key from their files as librdkafka's PEM settings, each parsed so
 * that a bad one is named now. Without a CA file, librdkafka verifies against OpenSSL's default
 * store (the system's CAs).
 */
async function tlsMaterial(settings: KafkaSettings): Promise<Record<string, string>> {
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
  return {
    ...(ca ? { 'ssl.ca.pem': ca } : {}),
    ...(cert && key ? { 'ssl.certificate.pem': cert, 'ssl.key.pem': key } : {}),
  };
}

/** How long the start-up check waits for the cluster to answer. */
const CHECK_TIMEOUT_MS = 15_000;

/**
 * Connects to the cluster once before anything starts and checks that the topics this process uses
 * exist when it may not create them: a wrong password, an untrusted broker certificate, an unreachable
 * cluster or missing topics are each a one-line {@link StartupError} naming the setting to change.
 */
export async function checkKafka(client: KafkaClient, topics: readonly string[]): Promise<void> {
  const { settings } = client;
  // A client of its own, quiet: librdkafka reports a refused login or an untrusted certificate to its
  // error callback (the request itself would only time out), so the callback's first such error ends
  // the check at once, and the failure is one line.
  let refused: (error: Error) => void = () => {};
  const failure = new Promise<never>((_, reject) => (refused = reject));
  failure.catch(() => {});
  const admin = new Kafka({
    ...client.config,
    kafkaJS: { ...client.config.kafkaJS!, logLevel: logLevel.ERROR, logger: errorCatcher(refused) },
  }).admin();
  let existing: Set<string>;
  try {
    await admin.connect();
    existing = new Set(await Promise.race([admin.listTopics({ timeout: CHECK_TIMEOUT_MS }), failure]));
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

/**
 * A librdkafka logger that says nothing and hands on the errors that no retry will cure: a refused
 * login (SASL) and a certificate that does not verify (TLS).
 */
function errorCatcher(fatal: (error: Error) => void): ReturnType<typeof kafkaLogger> {
  const logger = kafkaLogger(undefined);
  logger.error = (message: string) => {
    // The KafkaJS layer writes librdkafka's error as `Error: <its message>`.
    const error = message.replace(/^Error: /, '');
    if (SASL_REFUSED.test(error) || UNTRUSTED_CERTIFICATE.test(error)) fatal(new Error(error));
  };
  return logger;
}

/** librdkafka's words for a refused login: "SASL authentication error: Authentication failed ...". */
const SASL_REFUSED = /SASL authentication error|Authentication failed/i;
/** OpenSSL's words, in librdkafka's "SSL handshake failed", for a broker certificate it cannot trust. */
const UNTRUSTED_CERTIFICATE =
  /certificate verify failed|self[- ]signed certificate|unable to get (local )?issuer certificate|certificate has expired/i;

/** The one line that says which Kafka setting a connection failure points at. */
export function kafkaStartupError(client: KafkaClient, error: unknown): StartupError {
  const { settings } = client;
  const where = client.brokers.join(',');
  const message = describeError(error);
  if (SASL_REFUSED.test(message)) {
    const password = settings.KAFKA_SASL_PASSWORD_FILE ? 'KAFKA_SASL_PASSWORD_FILE' : 'KAFKA_SASL_PASSWORD';
    return new StartupError(
      `${password}: the Kafka cluster at ${where} refused user ${settings.KAFKA_SASL_USERNAME ?? '(none)'} with KAFKA_SASL_MECHANISM=${settings.KAFKA_SASL_MECHANISM ?? '(none)'} (${oneLine(message)}); check KAFKA_SASL_USERNAME and ${password}`,
    );
  }
  const untrusted = UNTRUSTED_CERTIFICATE.exec(message);
  if (untrusted) {
    const ca = settings.KAFKA_SSL_CA_FILE
      ? `KAFKA_SSL_CA_FILE=${settings.KAFKA_SSL_CA_FILE}`
      : 'KAFKA_SSL_CA_FILE';
    return new StartupError(
      `${ca}: the certificate of the Kafka broker at ${where} is not trusted (${untrusted[0].toLowerCase()}); set KAFKA_SSL_CA_FILE to the CA that signed it`,
    );
  }
  const hint = settings.KAFKA_SSL ? '' : '; if its listener uses TLS, set KAFKA_SSL=true';
  return new StartupError(`KAFKA_BROKERS=${where}: cannot use the Kafka cluster: ${oneLine(message)}${hint}`);
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, ' ').trim();
}
