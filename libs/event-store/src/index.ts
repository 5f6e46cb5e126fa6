export * from './types.js';
export * from './errors.js';
export * from './event-store.js';
export * from './command-handler.js';
export * from './parked-events.js';
