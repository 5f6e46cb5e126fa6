export * from './config.js';
export * from './platform.js';
