export * from './infrastructure.js';
export * from './postgres.js';
export * from './ports.js';
export * from './logger.js';
