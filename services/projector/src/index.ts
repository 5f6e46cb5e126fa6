export * from './module.js';
export * from './rebuild.js';
export * from './projection.js';
