import { request, type RequestOptions } from 'node:http';
import type { Logger } from '@ofp/runtime';
import { startKafkaCluster } from './kafka-broker.js';
import { CACHE_DIR } from './postgres.js';

export interface TestKafka {
  /** Bootstrap addresses (`host:port`). */
  brokers: string[];
  stop(): Promise<void>;
}

// @testcontainers/kafka drives Confluent's images only (it runs /etc/confluent/docker/run); Confluent
// Platform 8.0 ships Apache Kafka 4.0 and runs in KRaft mode.
const KAFKA_IMAGE = 'confluentinc/cp-kafka:8.0.0';
// The container's port for clients outside Docker, as @testcontainers/kafka configures its listeners.
const KAFKA_CONTAINER_PORT = 9093;

/**
 * The Kafka that tests use (ARCHITECTURE.md, "Real infrastructure in tests and development"):
 * `KAFKA_BROKERS` (comma-separated) when set; else a Testcontainers broker when a Docker engine answers;
 * else a local broker run from the official jars ({@link startKafkaCluster}), cached in `.cache`.
 * With `nodes` above 1, a local cluster of that many brokers (Testcontainers runs one).
 */
export async function startTestKafka(logger: Logger, nodes = 1): Promise<TestKafka> {
  const given = process.env.KAFKA_BROKERS;
  if (given) {
    const brokers = given
      .split(',')
      .map((broker) => broker.trim())
      .filter(Boolean);
    return { brokers, stop: async () => {} };
  }
  if (nodes === 1 && (await dockerAnswers())) {
    const container = await startKafkaContainer(logger);
    if (container) return container;
  }
  return startKafkaCluster({ cacheDir: CACHE_DIR, logger, nodes });
}

async function startKafkaContainer(logger: Logger): Promise<TestKafka | undefined> {
  // Imported only here: the machines without Docker should not pay for loading it. (Pinned to 11.x:
  // testcontainers 12 needs Node >= 22.22.)
  const testcontainers = await import('@testcontainers/kafka').catch((error: unknown) => {
    logger.warn(
      { err: error },
      'a Docker engine answers but Testcontainers does not load; using a local broker',
    );
    return undefined;
  });
  if (!testcontainers) return undefined;
  logger.info({ image: KAFKA_IMAGE }, 'starting Kafka with Testcontainers');
  const container = await new testcontainers.KafkaContainer(KAFKA_IMAGE).start();
  return {
    brokers: [`${container.getHost()}:${container.getMappedPort(KAFKA_CONTAINER_PORT)}`],
    stop: async () => {
      await container.stop();
    },
  };
}

/**
 * Whether a Docker engine answers `GET /_ping` within a second, at `DOCKER_HOST` (`unix://` or plain
 * `tcp://`) or the default socket. Asked directly rather than through Testcontainers' own discovery so
 * that the usual answer on the development machines and CI, "no", costs a failed connect and no import.
 */
function dockerAnswers(): Promise<boolean> {
  const host = process.env.DOCKER_HOST ?? 'unix:///var/run/docker.sock';
  let target: RequestOptions;
  if (host.startsWith('unix://')) target = { socketPath: host.slice('unix://'.length) };
  else if (host.startsWith('tcp://')) {
    const url = new URL(host);
    target = { host: url.hostname, port: url.port };
  } else return Promise.resolve(false);
  return new Promise((resolve) => {
    const ping = request({ ...target, path: '/_ping', timeout: 1_000 }, (response) => {
      response.resume();
      resolve(response.statusCode === 200);
    });
    ping.on('timeout', () => ping.destroy());
    ping.on('error', () => resolve(false));
    ping.end();
  });
}
