/**
 * For tests of the services built on this package: the in-memory reading of API.md §4 that the
 * search compiler's own tests check against, so that tests over HTTP compare the api with the same
 * independent oracle. Not for production code.
 *
 * @packageDocumentation
 */
export { oracleSearch, type OracleWorld } from './search-oracle.fixture.js';
export { queryArbitrary, type QueryArbitraryOptions } from './query-arbitrary.fixture.js';
export {
  hostileBody,
  hostileWrite,
  junkBody,
  validBodies,
  type BodyReferences,
  type HostileWrite,
  type JunkBody,
} from './hostile-write.fixture.js';
