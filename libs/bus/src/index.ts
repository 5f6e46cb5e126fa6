export * from './bus.js';
export * from './pg-log-bus.js';
export * from './wakeup.js';
export * from './kafka/cloudevents.js';
export * from './kafka/topics.js';
export * from './kafka/kafka-bus.js';
export * from './kafka/outbox-relay.js';
export * from './kafka/broker-check.js';
