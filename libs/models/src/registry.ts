import {
  column,
  defineModel,
  embedded,
  joined,
  list,
  MAX_ID,
  reference,
  type FieldMap,
  type ModelDefinition,
} from './fields.js';

// The model registry (API.md §6). Each model is declared here once.

/** The phone number types every organization has from the start (API.md §6). */
export const PHONE_NUMBER_TYPE_SEEDS = ['Work', 'Home', 'Mobile', 'Fax'] as const;

export const phoneNumberTypes = defineModel({
  name: 'phone_number_types',
  singular: 'phone_number_type',
  writeScope: 'write',
  fields: {
    name: column.string({ required: true, unique: true, maxLength: 100 }),
  },
});

export const people = defineModel({
  name: 'people',
  singular: 'person',
  writeScope: 'write',
  fields: {
    first_name: column.string(),
    last_name: column.string({ required: true }),
    email: column.string({ pattern: { regex: /^[^@\s]+@[^@\s]+$/, message: 'must be an email address' } }),
    company: column.string(),
    phone_numbers: list({
      number: column.string({
        required: true,
        maxLength: 20,
        pattern: { regex: /^\d{3,20}$/, message: 'must be 3 to 20 digits' },
      }),
      phone_number_type: reference(() => phoneNumberTypes, { lookupKeys: ['id', 'name'], display: ['name'] }),
    }),
  },
});

/** The length of free text (API.md §1: `description`, `notes`). */
export const LONG_TEXT = 10_000;

const CURRENCY = { regex: /^[A-Z]{3}$/, message: 'must be an ISO 4217 currency code such as USD' };

export const items = defineModel({
  name: 'items',
  singular: 'item',
  writeScope: 'write',
  fields: {
    sku: column.string({ required: true, unique: true }),
    name: column.string(),
    // Long text is not indexed: a B-tree entry cannot exceed about 2.7 kB.
    description: column.string({ maxLength: LONG_TEXT }),
    barcode: column.string(),
    unit_of_measure: column.string({ maxLength: 50 }),
    weight: column.weight({ min: 0 }),
    weight_unit: column.string({ values: ['g', 'kg', 'oz', 'lb'] }),
    price: column.money({ min: 0 }),
    currency: column.string({ maxLength: 3, pattern: CURRENCY }),
    active: column.boolean({ default: true }),
  },
});

/** A postal address (API.md §5), embedded as `ship_to`. */
const address: FieldMap = {
  name: column.string(),
  company: column.string(),
  address1: column.string(),
  address2: column.string(),
  city: column.string(),
  state: column.string(),
  postal_code: column.string({ maxLength: 20 }),
  country: column.string({
    maxLength: 2,
    pattern: { regex: /^[A-Z]{2}$/, message: 'must be an ISO 3166-1 alpha-2 code' },
  }),
  phone: column.string({ maxLength: 30 }),
  email: column.string(),
};

export const orders = defineModel({
  name: 'orders',
  singular: 'order',
  writeScope: 'write',
  events: {
    'order.cancelled': 'An order moved to cancelled (sent instead of order.updated)',
  },
  fields: {
    order_number: column.string({ required: true, unique: true }),
    status: column.string({
      values: ['pending', 'open', 'on_hold', 'partially_fulfilled', 'fulfilled', 'cancelled'],
    }),
    customer_id: column.integer({ references: () => people }),
    currency: column.string({ maxLength: 3, pattern: CURRENCY }),
    total: column.money({ readOnly: true }),
    requested_ship_date: column.date(),
    anticipated_ship_date: column.date(),
    shipping_method: column.string(),
    notes: column.string({ maxLength: LONG_TEXT }),
    ship_to: embedded(address),
    lines: list({
      item_id: column.integer({ references: () => items }),
      sku: column.string({ required: true }),
      quantity: column.integer({ required: true, min: 1 }),
      unit_price: column.money({ min: 0 }),
    }),
  },
  stateMachine: {
    column: 'status',
    initial: 'pending',
    transitions: {
      pending: ['open', 'cancelled'],
      open: ['partially_fulfilled', 'fulfilled', 'cancelled'],
      partially_fulfilled: ['fulfilled'],
      on_hold: ['cancelled'],
    },
    derived: ['partially_fulfilled', 'fulfilled'],
    hold: { state: 'on_hold', from: ['pending', 'open'] },
  },
});

export const fulfillmentOrders = defineModel({
  name: 'fulfillment_orders',
  singular: 'fulfillment_order',
  writeScope: 'write',
  // Closing a shipped fulfillment order is the operator's move (API.md §7).
  operatorChanges: true,
  events: {
    'fulfillment_order.shipped':
      'A fulfillment order shipped in full (sent instead of fulfillment_order.updated)',
    'fulfillment_order.cancelled':
      'A fulfillment order moved to cancelled (sent instead of fulfillment_order.updated)',
  },
  fields: {
    order_id: column.integer({ references: () => orders }),
    warehouse: column.string({ maxLength: 100 }),
    status: column.string({
      values: ['open', 'in_progress', 'on_hold', 'partially_shipped', 'shipped', 'closed', 'cancelled'],
    }),
    requested_ship_date: column.date(),
    anticipated_ship_date: column.date(),
    shipping_method: column.string(),
    ship_to: embedded(address),
    lines: list({
      sku: column.string({ required: true }),
      quantity: column.integer({ required: true, min: 1 }),
      quantity_shipped: column.integer({ readOnly: true, min: 0, default: 0 }),
    }),
    shipments: joined(() => shipments, { column: 'id', targetColumn: 'fulfillment_order_id' }),
  },
  stateMachine: {
    column: 'status',
    initial: 'open',
    transitions: {
      open: ['in_progress', 'partially_shipped', 'shipped', 'cancelled'],
      in_progress: ['partially_shipped', 'shipped', 'cancelled'],
      partially_shipped: ['shipped'],
      shipped: ['closed'],
      on_hold: ['cancelled'],
    },
    derived: ['partially_shipped', 'shipped'],
    hold: { state: 'on_hold', from: ['open', 'in_progress'] },
  },
});

export const shipments = defineModel({
  name: 'shipments',
  singular: 'shipment',
  writeScope: 'operations',
  // A shipment counts as shipped from its creation: it is cancelled, never deleted (API.md §6).
  deletable: false,
  events: {
    'shipment.tracking_updated':
      "A shipment's status (other than to delivered or cancelled), estimated delivery or a package's tracking number or URL changed (sent instead of shipment.updated)",
    'shipment.delivered': 'A shipment was delivered (sent instead of shipment.updated)',
  },
  fields: {
    fulfillment_order_id: column.integer({ required: true, references: () => fulfillmentOrders }),
    status: column.string({
      values: ['label_created', 'in_transit', 'out_for_delivery', 'delivered', 'exception', 'cancelled'],
    }),
    carrier: column.string(),
    service: column.string(),
    shipped_at: column.timestamp(),
    estimated_delivery_at: column.timestamp(),
    delivered_at: column.timestamp(),
    packages: list({
      tracking_number: column.string(),
      tracking_url: column.string({ maxLength: 2000 }),
      weight: column.weight({ min: 0 }),
      lines: list({
        sku: column.string({ required: true }),
        quantity: column.integer({ required: true, min: 1 }),
      }),
    }),
  },
  stateMachine: {
    column: 'status',
    initial: 'label_created',
    transitions: {
      label_created: ['in_transit', 'exception', 'cancelled'],
      in_transit: ['out_for_delivery', 'exception', 'cancelled'],
      out_for_delivery: ['delivered', 'exception', 'cancelled'],
      exception: ['cancelled'],
    },
    derived: [],
  },
});

export const purchaseOrders = defineModel({
  name: 'purchase_orders',
  singular: 'purchase_order',
  writeScope: 'write',
  // Receiving is the operator's change (API.md §7).
  operatorChanges: true,
  events: {
    'purchase_order.received':
      'A purchase order was received in full (sent instead of purchase_order.updated)',
  },
  fields: {
    po_number: column.string({ required: true, unique: true }),
    vendor_name: column.string(),
    warehouse: column.string({ maxLength: 100 }),
    status: column.string({
      values: ['draft', 'open', 'partially_received', 'received', 'closed', 'cancelled'],
    }),
    expected_arrival_date: column.date(),
    currency: column.string({ maxLength: 3, pattern: CURRENCY }),
    total: column.money({ readOnly: true }),
    lines: list({
      sku: column.string({ required: true }),
      quantity: column.integer({ required: true, min: 1 }),
      // Left out of a line of a PUT, it keeps its value: receiving is a PUT of the grown quantities.
      quantity_received: column.integer({ min: 0 }),
      unit_cost: column.money({ min: 0 }),
    }),
  },
  stateMachine: {
    column: 'status',
    initial: 'draft',
    transitions: {
      draft: ['open', 'cancelled'],
      open: ['partially_received', 'received', 'cancelled'],
      partially_received: ['received'],
      received: ['closed'],
    },
    derived: ['partially_received', 'received'],
  },
});

export const invoices = defineModel({
  name: 'invoices',
  singular: 'invoice',
  writeScope: 'operations',
  deletable: false,
  events: {
    'invoice.paid': 'An invoice was paid in full (sent instead of invoice.updated)',
  },
  fields: {
    invoice_number: column.string({ required: true, unique: true }),
    order_id: column.integer({ references: () => orders }),
    purchase_order_id: column.integer({ references: () => purchaseOrders }),
    status: column.string({ values: ['open', 'partially_paid', 'paid', 'void'] }),
    currency: column.string({ maxLength: 3, pattern: CURRENCY }),
    issue_date: column.date(),
    due_date: column.date(),
    total: column.money({ readOnly: true }),
    amount_paid: column.money({ min: 0, default: '0.00' }),
    amount_due: column.money({ readOnly: true }),
    lines: list({
      description: column.string({ maxLength: LONG_TEXT }),
      sku: column.string(),
      quantity: column.integer({ required: true, min: 1 }),
      unit_price: column.money({ required: true }),
      amount: column.money({ readOnly: true }),
    }),
  },
  stateMachine: {
    column: 'status',
    initial: 'open',
    transitions: { open: ['partially_paid', 'paid', 'void'], partially_paid: ['paid'] },
    derived: ['partially_paid', 'paid'],
  },
});

export const returns = defineModel({
  name: 'returns',
  singular: 'return',
  writeScope: 'write',
  // Authorizing, receiving, refunding and rejecting are the operator's changes (API.md §6).
  operatorChanges: true,
  events: {
    'return.received': 'A return was received in full (sent instead of return.updated)',
  },
  fields: {
    rma_number: column.string({ required: true, unique: true }),
    order_id: column.integer({ references: () => orders }),
    warehouse: column.string({ maxLength: 100 }),
    status: column.string({
      values: [
        'requested',
        'authorized',
        'partially_received',
        'received',
        'refunded',
        'closed',
        'rejected',
        'cancelled',
      ],
    }),
    reason: column.string({ maxLength: 1000 }),
    // Given by the receiving operator, or set when the return becomes received.
    received_at: column.timestamp(),
    lines: list({
      sku: column.string({ required: true }),
      quantity: column.integer({ required: true, min: 1 }),
      // Left out of a line of a PUT, it keeps its value: receiving is a PUT of the grown quantities.
      quantity_received: column.integer({ min: 0 }),
      // Left out, `restock` on a new line and its value on a line a PUT gives again.
      disposition: column.string({ values: ['restock', 'dispose'] }),
    }),
  },
  stateMachine: {
    column: 'status',
    initial: 'requested',
    transitions: {
      requested: ['authorized', 'rejected', 'cancelled'],
      authorized: ['partially_received', 'received', 'rejected', 'cancelled'],
      partially_received: ['received'],
      received: ['refunded'],
      refunded: ['closed'],
    },
    derived: ['partially_received', 'received'],
  },
});

/**
 * A stock total of an inventory record. A write that would take one beyond 32 bits, like a quantity,
 * is refused before it is appended (the api's stock check); the record itself holds up to
 * ±(2^53 - 1), so that writes decided at the same moment on the same stock, each within 32 bits,
 * still apply when the inventory manager adds them up.
 */
const STOCK_TOTAL = { readOnly: true, nullable: false, min: -MAX_ID, max: MAX_ID } as const;

export const inventory = defineModel({
  name: 'inventory',
  singular: 'inventory',
  writeScope: 'operations',
  // Derived from events by the inventory process manager (API.md §6); no client writes it.
  writes: 'read-only',
  events: {
    'inventory.created': 'Stock of a sku in a warehouse was first recorded',
    'inventory.updated': 'Stock of a sku in a warehouse changed (on hand, committed, available or inbound)',
  },
  fields: {
    item_id: column.integer({ readOnly: true, min: 1, max: MAX_ID }),
    sku: column.string({ readOnly: true, nullable: false }),
    warehouse: column.string({ readOnly: true, maxLength: 100 }),
    on_hand: column.integer(STOCK_TOTAL),
    committed: column.integer(STOCK_TOTAL),
    available: column.integer(STOCK_TOTAL),
    inbound: column.integer(STOCK_TOTAL),
    // By sku rather than item_id: an item created after its stock was counted is still found.
    item: joined(() => items, { column: 'sku', targetColumn: 'sku' }),
  },
});

export const inventoryAdjustments = defineModel({
  name: 'inventory_adjustments',
  singular: 'inventory_adjustment',
  writeScope: 'write',
  writes: 'append-only',
  fields: {
    sku: column.string({ required: true }),
    warehouse: column.string({ maxLength: 100 }),
    quantity_delta: column.integer({ required: true }),
    reason: column.string({ maxLength: 1000 }),
  },
});

/** Every model of the registry, by endpoint name. */
export const MODELS: Readonly<Record<string, ModelDefinition>> = {
  [phoneNumberTypes.name]: phoneNumberTypes,
  [people.name]: people,
  [items.name]: items,
  [orders.name]: orders,
  [fulfillmentOrders.name]: fulfillmentOrders,
  [shipments.name]: shipments,
  [purchaseOrders.name]: purchaseOrders,
  [invoices.name]: invoices,
  [returns.name]: returns,
  [inventory.name]: inventory,
  [inventoryAdjustments.name]: inventoryAdjustments,
};

/** The model served at `/v2/<name>`, or `undefined` for an unknown name. */
export function findModel(name: string): ModelDefinition | undefined {
  return Object.hasOwn(MODELS, name) ? MODELS[name] : undefined;
}
