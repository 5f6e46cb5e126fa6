export * from './errors.js';
export * from './envelope.js';
export * from './record-events.js';
