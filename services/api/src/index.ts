export * from './module.js';
export { preparedQuery, searchEnvelopeJson } from './queries/record-queries.js';
