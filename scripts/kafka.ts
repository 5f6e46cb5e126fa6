/**
 * Runs a local Apache Kafka broker (KRaft mode, from the official jars, no Docker) for development and
 * the local distributed run, until SIGINT or SIGTERM:
 *
 *   npm run kafka                  (or: npx tsx scripts/kafka.ts)
 *   npm run kafka -- --sasl-ssl    also a SASL_SSL listener, as managed Kafka has
 *
 * Prints `KAFKA_BROKERS=<host:port>` once the broker answers (with --sasl-ssl, the settings of the
 * SASL_SSL listener: a CA made for this broker, SCRAM-SHA-512 credentials, a client certificate), and exits with 1 if the broker stops on
 * its own. The jars are fetched into `.cache` on first use. A supervisor that signals one pid should
 * run `node --import tsx scripts/kafka.ts`: npm and npx do not pass SIGTERM on to tsx.
 */
import { pino } from 'pino';
// From the sources, so that `npm run kafka` needs no build.
import { startKafkaBroker } from '../libs/testing/src/kafka-broker.js';
import { CACHE_DIR } from '../libs/testing/src/postgres.js';
const logger = pino({ name: 'kafka', level: 'info' });
const kafka = await startKafkaBroker({
  cacheDir: CACHE_DIR,
  logger,
  saslSsl: process.argv.includes('--sasl-ssl'),
});
const { secure } = kafka;
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
    logger.info({ signal }, 'stopping the Kafka broker');
    void kafka.stop();
  });
}
// The running broker is all that keeps this process alive; if it ends without a signal, it failed.
process.once('beforeExit', () => {
  if (!stopping) process.exitCode = 1;
});
