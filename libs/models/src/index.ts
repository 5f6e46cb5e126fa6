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
  joined,
  list,
  reference,
  RECORD_ID,
  RECORD_METADATA,
  type BooleanColumn,
  type ColumnDefinition,
  type ColumnRules,
  type ColumnType,
  type DateColumn,
  type DecimalColumn,
  type FieldDefinition,
  type FieldMap,
  type IntegerColumn,
  type JoinedDefinition,
  type ListDefinition,
  type ModelDeclaration,
  type ModelDefinition,
  type ObjectDefinition,
  type ReferenceDefinition,
  type RelationDefinition,
  type StringColumn,
  type TextPattern,
  type TimestampColumn,
  type WriteAccess,
  type WriteScope,
} from './fields.js';
export { allowedMethods } from './methods.js';
export { transitionError, type StateMachine } from './state-machine.js';
export {
  findModel,
  fulfillmentOrders,
  inventory,
  inventoryAdjustments,
  invoices,
  items,
  MODELS,
  orders,
  people,
  PHONE_NUMBER_TYPE_SEEDS,
  phoneNumberTypes,
  purchaseOrders,
  shipments,
} from './registry.js';
export { columnPath, validateCreate, validateUpdate, type RecordBody } from './validation.js';
export { DELETED_RECORDS_TABLE, readModelDdl, RECORD_COUNTS_TABLE } from './ddl.js';
export { deleteRecord, renderDocuments, writeRecord, type RecordState } from './projection.js';
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
  type RecordJson,
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
export {
  WEBHOOK_ATTEMPT_ERROR_KINDS,
  WEBHOOK_DELIVERY_STATUSES,
  webhookDeliveries,
  webhooks,
} from './registry.js';
