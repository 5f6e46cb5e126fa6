/**
 * Runs local Apache Kafka (KRaft mode, from the official jars, no Docker) for development and the local
 * distributed run, until SIGINT or SIGTERM:
 *
 *   npm run kafka                  one broker  (or: npx tsx scripts/kafka.ts)
 *   npm run kafka -- --brokers 3   a cluster of three nodes, each a broker and a controller, with
 *                                  three replicas of every partition and two in sync for acks=all
 *   npm run kafka -- --sasl-ssl    one broker with a SASL_SSL listener too, as managed Kafka has
 *
 * Prints `KAFKA_BROKERS=<host:port,...>` (every broker) once all answer (with --sasl-ssl, the settings of
 * the SASL_SSL listener: a CA made for this broker, SCRAM-SHA-512 credentials, a client certificate), and
 * exits with 1 if the brokers stop on their own. The jars are fetched into `.cache` on first use. A
 * supervisor that signals one pid should run `node --import tsx scripts/kafka.ts`: npm and npx do not
 * pass SIGTERM on to tsx.
 */
import { parseArgs } from 'node:util';
import { pino } from 'pino';
// From the sources, so that `npm run kafka` needs no build.
import { startKafkaBroker, startKafkaCluster } from '../libs/testing/src/kafka-broker.js';
import { CACHE_DIR } from '../libs/testing/src/postgres.js';
const logger = pino({ name: 'kafka', level: 'info' });
const { values } = parseArgs({
  options: { brokers: { type: 'string', default: '1' }, 'sasl-ssl': { type: 'boolean', default: false } },
});
const nodes = Number(values.brokers);
const wrong = !(Number.isInteger(nodes) && nodes >= 1)
  ? `--brokers ${values.brokers}: a number of brokers, 1 or more, is needed`
  : values['sasl-ssl'] && nodes > 1
    ? '--sasl-ssl runs a single broker: it cannot be given with --brokers above 1'
    : undefined;
if (wrong) {
  console.error(wrong);
  process.exit(2);
}
const kafka =
  nodes === 1
    ? await startKafkaBroker({ cacheDir: CACHE_DIR, logger, saslSsl: values['sasl-ssl'] })
    : await startKafkaCluster({ cacheDir: CACHE_DIR, logger, nodes });
const secure = 'secure' in kafka ? kafka.secure : undefined;
if (secure) {
  console.log(
    [
      `KAFKA_BROKERS=${secure.brokers.join(',')}`,
      'KAFKA_SSL=true',
      `KAFKA_SSL_CA_FILE=${secure.caFile}`,
      `KAFKA_SSL_CERT_FILE=${secure.clientCertFile}`,
      `KAFKA_SSL_KEY_FILE=${secure.clientKeyFile}`,
      'KAFKA_SASL_MECHANISM=scram-sha-512',
      `KAFKA_SASL_USERNAME=${secure.username}`,
      `KAFKA_SASL_PASSWORD=${secure.password}`,
      `# plaintext listener: ${kafka.brokers.join(',')}`,
    ].join('\n'),
  );
} else console.log(`KAFKA_BROKERS=${kafka.brokers.join(',')}`);

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    stopping = true;
    logger.info({ signal }, 'stopping Kafka');
    void kafka.stop();
  });
}
// The running brokers are all that keeps this process alive; if they end without a signal, they failed.
process.once('beforeExit', () => {
  if (!stopping) process.exitCode = 1;
});
