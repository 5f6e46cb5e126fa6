/**
 * `@ofp/standalone`: what the standalone mode (`npm start`, `TARGET=all`) runs on one machine beside
 * the services, and what finds it again: the embedded Postgres in the data directory, the lock that
 * keeps one instance per data directory, and `instance.json`, which tells the command-line tools
 * (`orderctl`, `rebuild-projections`) where the running instance is.
 *
 * @packageDocumentation
 */
export * from './embedded-postgres.js';
export * from './instance-lock.js';
export * from './standalone-instance.js';
