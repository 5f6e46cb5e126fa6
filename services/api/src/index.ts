export * from './module.js';
export { preparedQuery, searchEnvelopeJson } from './queries/record-queries.js';
export type { PublishedEventType } from './http/event-feed-route.js';
export { encodeCursor, FEED_LIMITS, FEED_RETENTION_DAYS } from './queries/event-feed.js';
