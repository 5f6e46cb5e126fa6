export * from './infrastructure.js';
export * from './postgres.js';
export * from './kafka.js';
export * from './kafka-broker.js';
export * from './ports.js';
export * from './logger.js';
export * from './platform-processes.js';
export * from './api-client.js';
