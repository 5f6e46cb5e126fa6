export * from './module.js';
