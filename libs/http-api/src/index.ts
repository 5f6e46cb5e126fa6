export * from './http.js';
export * from './routes.js';
export * from './reply.js';
export * from './openapi.js';
export * from './http-errors.js';
export * from './record-http.js';
export * from './idempotency.js';
