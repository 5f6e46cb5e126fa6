export * from './module.js';
export { preparedQuery } from './queries/record-queries.js';
