/**
 * The model registry and everything derived from it: request validation, the read-model tables,
 * projection writes, the `q` language and its SQL compiler.
 *
 * @packageDocumentation
 */
export {
  column,
  defineModel,
  embedded,
  INT32,
  joined,
  list,
  MAX_ID,
  MONEY,
  reference,
  RECORD_ID,
  RECORD_METADATA,
  type BooleanColumn,
  type ColumnDefinition,
  type ColumnRules,
  type ColumnType,
  type DateColumn,
  type DecimalColumn,
  type EventType,
  type FieldDefinition,
  type FieldMap,
  type IntegerColumn,
  type JoinedDefinition,
  type ListDefinition,
  type ModelDeclaration,
  type ModelDefinition,
  type ModelExample,
  type ObjectDefinition,
  type ReferenceDefinition,
  type RelationDefinition,
  type StringColumn,
  type TextPattern,
  type TimestampColumn,
  type WriteAccess,
  type WriteScope,
  WEIGHT,
} from './fields.js';
export { allowedMethods } from './allowed-methods.js';
export {
  canonicalDecimal,
  decimalText,
  decimalUnits,
  digitsProblem,
  fitsDecimal,
  type DecimalFormat,
} from './formats.js';
export { transitionError, type StateMachine } from './state-machine.js';
export {
  findModel,
  isModelName,
  fulfillmentOrders,
  inventory,
  inventoryAdjustments,
  invoices,
  items,
  LONG_TEXT,
  MODELS,
  type ModelName,
  orders,
  people,
  PHONE_NUMBER_TYPE_SEEDS,
  phoneNumberTypes,
  purchaseOrders,
  returns,
  shipments,
} from './registry.js';
export {
  boundsErrors,
  columnPath,
  requestBodySchema,
  validateCreate,
  validateUpdate,
  type RecordBody,
} from './validation.js';
export {
  eventExample,
  eventPayloadSchema,
  querySchema,
  recordFields,
  recordSchema,
  schemaName,
  searchDescription,
  searchEnvelopeSchema,
  searchExamples,
  searchParameter,
  singleEnvelopeSchema,
  writableOf,
  writeSchema,
  type EventExample,
} from './api-schemas.js';
export { eventPayload, publishedEventOf, type PublishedEvent } from './event-payload.js';
export { DELETED_RECORDS_TABLE, readModelDdl, RECORD_COUNTS_TABLE } from './ddl.js';
export { inRegistryOrder } from './key-order.js';
export {
  advanceCheckpoint,
  createReadSchema,
  notifiedProgress,
  progressNotification,
  projectedVersions,
  PROJECTION_CHANNEL,
  PROJECTION_LOCK,
  READ_SCHEMA,
} from './read-model.js';
export {
  deleteRecord,
  renderDocuments,
  writeRecord,
  writeRecords,
  type RecordDocument,
  type RecordWrite,
} from './projection.js';
export {
  OPERATORS,
  parseQuery,
  Q_LIMITS,
  resolveOperand,
  type Comparison,
  type Direction,
  type Filter,
  type Operator,
  type OrderTerm,
  type ScalarValue,
  type SearchQuery,
} from './query.js';
export {
  compileGet,
  compileSearch,
  getRecord,
  searchRecords,
  type SearchRow,
  type SearchRowText,
} from './search.js';
export { type CompiledQuery, type Queryable, type ReadModelOptions } from './sql.js';
export {
  tableTree,
  type ChildTable,
  type StoredColumn,
  type StoredReference,
  type TableJoin,
  type TableNode,
} from './tables.js';
