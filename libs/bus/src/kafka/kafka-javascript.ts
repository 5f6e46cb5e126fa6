// @confluentinc/kafka-javascript's KafkaJS-compatible API, as the rest of the bus uses it. The package is
// CommonJS with its KafkaJS classes under one export, which ESM cannot import by name.
import confluent, { type KafkaJS } from '@confluentinc/kafka-javascript';
import type { Logger } from '@ofp/runtime';

export const { Kafka, logLevel, ErrorCodes } = confluent.KafkaJS;
export type Kafka = KafkaJS.Kafka;
export type Admin = KafkaJS.Admin;
export type Consumer = KafkaJS.Consumer;
export type Producer = KafkaJS.Producer;
export type CommonConstructorConfig = KafkaJS.CommonConstructorConfig;
export type ConsumerConstructorConfig = KafkaJS.ConsumerConstructorConfig;
export type ProducerConstructorConfig = KafkaJS.ProducerConstructorConfig;
export type EachBatchPayload = KafkaJS.EachBatchPayload;
export type KafkaMessage = KafkaJS.KafkaMessage;
export type Message = KafkaJS.Message;
export type RecordMetadata = KafkaJS.RecordMetadata;
export type TopicMessages = KafkaJS.TopicMessages;
export type TopicPartition = KafkaJS.TopicPartition;
/** The node-rdkafka-style API under the KafkaJS one: its metadata names the broker that answered (topics.ts). */
export type {
  Metadata as RdKafkaMetadata,
  Producer as RdKafkaProducer,
} from '@confluentinc/kafka-javascript';

/**
 * librdkafka's log lines and the KafkaJS layer's own (through that layer) into the process's pino
 * logger, or nowhere. The layer sets the level from the client's `logLevel` (setLogLevel) and leaves
 * the filtering to the logger; each line keeps librdkafka's facility (`fac`).
 */
export function kafkaLogger(logger: Logger | undefined): KafkaJS.Logger {
  let threshold: number = logLevel.WARN;
  const to =
    (level: 'debug' | 'info' | 'warn' | 'error', severity: number) =>
    (message: string, extra?: object): void => {
      if (severity <= threshold) logger?.[level]({ librdkafka: extra }, message);
    };
  const adapter: KafkaJS.Logger = {
    debug: to('debug', logLevel.DEBUG),
    info: to('info', logLevel.INFO),
    warn: to('warn', logLevel.WARN),
    error: to('error', logLevel.ERROR),
    namespace: () => adapter,
    setLogLevel: (level) => void (threshold = level),
  };
  return adapter;
}
