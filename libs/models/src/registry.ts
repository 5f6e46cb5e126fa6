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
    name: column.string({
      required: true,
      unique: true,
      maxLength: 100,
      description:
        "The type's name, unique per organization (`Work`, `Home`, `Mobile`, `Fax` exist from the start)",
    }),
  },
});

export const people = defineModel({
  name: 'people',
  singular: 'person',
  writeScope: 'write',
  fields: {
    first_name: column.string({ description: 'Given name' }),
    last_name: column.string({ required: true, description: 'Family name, the one name a person needs' }),
    email: column.string({
      pattern: { regex: /^[^@\s]+@[^@\s]+$/, message: 'must be an email address' },
      description: 'Email address',
    }),
    company: column.string({ description: 'The company the person works for' }),
    phone_numbers: list(
      {
        number: column.string({
          required: true,
          maxLength: 20,
          pattern: { regex: /^\d{3,20}$/, message: 'must be 3 to 20 digits' },
          description: 'The number, digits only (3 to 20)',
        }),
        phone_number_type: reference(() => phoneNumberTypes, {
          lookupKeys: ['id', 'name'],
          display: ['name'],
          description:
            'Its type: written as `{"id": N}` or `{"name": "Work"}`, answered as `{"id", "name"}`; null for none',
        }),
      },
      { description: 'Phone numbers; a list given replaces the old one' },
    ),
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
    sku: column.string({
      required: true,
      unique: true,
      description:
        'Stock keeping unit, unique per organization: order, shipment and inventory lines name items by it',
    }),
    name: column.string({ description: 'Display name' }),
    // Long text is not indexed: a B-tree entry cannot exceed about 2.7 kB.
    description: column.string({ maxLength: LONG_TEXT, description: 'Free text' }),
    barcode: column.string({ description: 'Barcode (GTIN, UPC, EAN) as printed' }),
    unit_of_measure: column.string({
      maxLength: 50,
      description: 'The unit one quantity counts (`each`, `case`)',
    }),
    weight: column.weight({
      min: 0,
      description: 'Weight of one unit in `weight_unit`, a decimal string (`"1.250"`)',
    }),
    weight_unit: column.string({ values: ['g', 'kg', 'oz', 'lb'], description: 'The unit of `weight`' }),
    price: column.money({ min: 0, description: 'Unit price in `currency`, a decimal string (`"12.50"`)' }),
    currency: column.string({ maxLength: 3, pattern: CURRENCY, description: 'ISO 4217 code of `price`' }),
    active: column.boolean({ default: true, description: 'False for an item no longer sold' }),
  },
});

/** A postal address (API.md §5), embedded as `ship_to`. */
const address: FieldMap = {
  name: column.string({ description: 'Recipient' }),
  company: column.string({ description: "Recipient's company" }),
  address1: column.string({ description: 'Street address' }),
  address2: column.string({ description: 'Apartment, suite, floor' }),
  city: column.string({ description: 'City' }),
  state: column.string({ description: 'State, province or region' }),
  postal_code: column.string({ maxLength: 20, description: 'Postal or ZIP code' }),
  country: column.string({
    maxLength: 2,
    pattern: { regex: /^[A-Z]{2}$/, message: 'must be an ISO 3166-1 alpha-2 code' },
    description: 'ISO 3166-1 alpha-2 country code (`US`, `DE`)',
  }),
  phone: column.string({ maxLength: 30, description: "Recipient's phone, for the carrier" }),
  email: column.string({ description: "Recipient's email, for the carrier's notices" }),
};

/** Where a record ships (API.md §5). */
const SHIP_TO = 'Where it ships: an address object, or null while unknown';

/** When an order or fulfillment order is to ship. */
const SHIP_DATES = {
  requested_ship_date: column.date({ description: 'The date the customer asked it to ship by (YYYY-MM-DD)' }),
  anticipated_ship_date: column.date({ description: 'The date it is expected to ship (YYYY-MM-DD)' }),
  shipping_method: column.string({
    description: 'How it ships, as the integrator names it (`ground`, `UPS 2nd Day Air`)',
  }),
} as const satisfies FieldMap;

export const orders = defineModel({
  name: 'orders',
  singular: 'order',
  writeScope: 'write',
  events: {
    'order.cancelled': 'An order moved to cancelled (sent instead of order.updated)',
  },
  fields: {
    order_number: column.string({
      required: true,
      unique: true,
      description: 'The order number, unique per organization',
    }),
    status: column.string({
      values: ['pending', 'open', 'on_hold', 'partially_fulfilled', 'fulfilled', 'cancelled'],
      description:
        'pending → open → partially_fulfilled → fulfilled (those two derived from its shipments); pending|open → on_hold → back; → cancelled',
    }),
    customer_id: column.integer({
      references: () => people,
      description: 'The person who ordered (a people id)',
    }),
    currency: column.string({ maxLength: 3, pattern: CURRENCY, description: 'ISO 4217 code of the amounts' }),
    total: column.money({
      readOnly: true,
      description: "Derived: the sum of the lines' quantity × unit_price, a decimal string in `currency`",
    }),
    ...SHIP_DATES,
    notes: column.string({ maxLength: LONG_TEXT, description: 'Free text' }),
    ship_to: embedded(address, { description: SHIP_TO }),
    lines: list(
      {
        item_id: column.integer({ references: () => items, description: 'The item ordered (an items id)' }),
        sku: column.string({ required: true, description: 'The sku ordered' }),
        quantity: column.integer({ required: true, min: 1, description: 'Units ordered' }),
        unit_price: column.money({
          min: 0,
          description: 'Price of one unit, a decimal string in `currency`',
        }),
      },
      { description: 'What is ordered; a list given replaces the old one' },
    ),
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
    order_id: column.integer({
      references: () => orders,
      description: 'The order it fulfills (an orders id)',
    }),
    warehouse: column.string({
      maxLength: 100,
      description: 'The warehouse that ships it, and whose inventory it commits',
    }),
    status: column.string({
      values: ['open', 'in_progress', 'on_hold', 'partially_shipped', 'shipped', 'closed', 'cancelled'],
      description:
        'open → in_progress → partially_shipped → shipped (those two derived from its shipments) → closed; open|in_progress → on_hold → back; → cancelled',
    }),
    ...SHIP_DATES,
    ship_to: embedded(address, { description: SHIP_TO }),
    lines: list(
      {
        sku: column.string({ required: true, description: 'The sku to ship' }),
        quantity: column.integer({
          required: true,
          min: 1,
          description: 'Units to ship, committed in inventory until shipped',
        }),
        quantity_shipped: column.integer({
          readOnly: true,
          min: 0,
          default: 0,
          description:
            "Derived: units of this sku in the fulfillment order's shipments that are not cancelled",
        }),
      },
      { description: 'What to ship; a list given replaces the old one' },
    ),
    shipments: joined(() => shipments, {
      column: 'id',
      targetColumn: 'fulfillment_order_id',
      description: 'Its shipments, for `q` (`shipments.status`); not in the record',
    }),
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
    fulfillment_order_id: column.integer({
      required: true,
      references: () => fulfillmentOrders,
      description: 'The fulfillment order it ships (a fulfillment_orders id)',
    }),
    status: column.string({
      values: ['label_created', 'in_transit', 'out_for_delivery', 'delivered', 'exception', 'cancelled'],
      description:
        'label_created → in_transit → out_for_delivery → delivered; any but delivered → exception or cancelled (which gives its quantities back)',
    }),
    carrier: column.string({ description: 'The carrier (`UPS`, `FedEx`, `DHL`)' }),
    service: column.string({ description: "The carrier's service level (`Ground`, `2nd Day Air`)" }),
    shipped_at: column.timestamp({ description: 'When it left the warehouse (RFC 3339, UTC)' }),
    estimated_delivery_at: column.timestamp({
      description: "The carrier's delivery estimate (RFC 3339, UTC)",
    }),
    delivered_at: column.timestamp({ description: 'When it was delivered (RFC 3339, UTC)' }),
    packages: list(
      {
        tracking_number: column.string({ description: "The carrier's tracking number" }),
        tracking_url: column.string({ maxLength: 2000, description: 'Where the recipient tracks it' }),
        weight: column.weight({ min: 0, description: 'Package weight, a decimal string (`"2.500"`)' }),
        lines: list(
          {
            sku: column.string({ required: true, description: 'The sku packed' }),
            quantity: column.integer({ required: true, min: 1, description: 'Units packed' }),
          },
          { description: 'What the package holds: these quantities count as shipped' },
        ),
      },
      { description: 'The packages, each with its tracking and contents; a list given replaces the old one' },
    ),
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
    po_number: column.string({
      required: true,
      unique: true,
      description: 'The purchase order number, unique per organization',
    }),
    vendor_name: column.string({ description: 'The vendor it is ordered from' }),
    warehouse: column.string({
      maxLength: 100,
      description: 'The warehouse that receives it, whose `inbound` it adds to',
    }),
    status: column.string({
      values: ['draft', 'open', 'partially_received', 'received', 'closed', 'cancelled'],
      description:
        'draft → open → partially_received → received (those two derived from the lines) → closed; draft|open → cancelled',
    }),
    expected_arrival_date: column.date({
      description: 'The date it is expected at the warehouse (YYYY-MM-DD)',
    }),
    currency: column.string({ maxLength: 3, pattern: CURRENCY, description: 'ISO 4217 code of the amounts' }),
    total: column.money({
      readOnly: true,
      description: "Derived: the sum of the lines' quantity × unit_cost, a decimal string in `currency`",
    }),
    lines: list(
      {
        sku: column.string({ required: true, description: 'The sku ordered' }),
        quantity: column.integer({ required: true, min: 1, description: 'Units ordered' }),
        // Left out of a line of a PUT, it keeps its value: receiving is a PUT of the grown quantities.
        quantity_received: column.integer({
          min: 0,
          description:
            'Units received so far: receiving is a PUT that grows it (never shrinks, at most `quantity`)',
        }),
        unit_cost: column.money({ min: 0, description: 'Cost of one unit, a decimal string in `currency`' }),
      },
      { description: 'What is ordered; a list given replaces the old one' },
    ),
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
    invoice_number: column.string({
      required: true,
      unique: true,
      description: 'The invoice number, unique per organization',
    }),
    order_id: column.integer({ references: () => orders, description: 'The order it bills (an orders id)' }),
    purchase_order_id: column.integer({
      references: () => purchaseOrders,
      description: "The purchase order it is the vendor's bill for (a purchase_orders id)",
    }),
    status: column.string({
      values: ['open', 'partially_paid', 'paid', 'void'],
      description: 'open → partially_paid → paid (those two derived from amount_paid); open → void',
    }),
    currency: column.string({ maxLength: 3, pattern: CURRENCY, description: 'ISO 4217 code of the amounts' }),
    issue_date: column.date({ description: 'The date it was issued (YYYY-MM-DD)' }),
    due_date: column.date({ description: 'The date payment is due (YYYY-MM-DD)' }),
    total: column.money({
      readOnly: true,
      description: "Derived: the sum of the lines' amounts, a decimal string in `currency`",
    }),
    amount_paid: column.money({
      min: 0,
      default: '0.00',
      description:
        'Paid so far: paying is a PUT that grows it (never shrinks, at most `total`), a decimal string',
    }),
    amount_due: column.money({
      readOnly: true,
      description: 'Derived: total - amount_paid, a decimal string',
    }),
    lines: list(
      {
        description: column.string({ maxLength: LONG_TEXT, description: 'What the line bills' }),
        sku: column.string({ description: 'The sku billed, if any' }),
        quantity: column.integer({ required: true, min: 1, description: 'Units billed' }),
        unit_price: column.money({
          required: true,
          description: 'Price of one unit, a decimal string in `currency`',
        }),
        amount: column.money({
          readOnly: true,
          description: 'Derived: quantity × unit_price, a decimal string',
        }),
      },
      { description: 'What is billed; a list given replaces the old one' },
    ),
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
    rma_number: column.string({
      required: true,
      unique: true,
      description: 'The return merchandise authorization number, unique per organization',
    }),
    order_id: column.integer({
      references: () => orders,
      description: 'The order returned from (an orders id)',
    }),
    warehouse: column.string({
      maxLength: 100,
      description: 'The warehouse that receives it, whose `on_hand` restocked lines add to',
    }),
    status: column.string({
      description:
        'requested → authorized → partially_received → received (those two derived from the lines) → refunded → closed; requested|authorized → rejected or cancelled',
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
    reason: column.string({
      maxLength: 1000,
      description: "Why it is returned, in the customer's or the integrator's words",
    }),
    // Given by the receiving operator, or set when the return becomes received.
    received_at: column.timestamp({
      description:
        'When it was received in full (RFC 3339, UTC): given by the operator, else set when it becomes received',
    }),
    lines: list(
      {
        sku: column.string({ required: true, description: 'The sku returned' }),
        quantity: column.integer({ required: true, min: 1, description: 'Units to be returned' }),
        // Left out of a line of a PUT, it keeps its value: receiving is a PUT of the grown quantities.
        quantity_received: column.integer({
          min: 0,
          description:
            'Units received so far: receiving is a PUT that grows it (never shrinks, at most `quantity`)',
        }),
        // Left out, `restock` on a new line and its value on a line a PUT gives again.
        disposition: column.string({
          values: ['restock', 'dispose'],
          description:
            "restock: received units join the warehouse's on_hand; dispose: they do not. restock unless given; fixed once the line received anything",
        }),
      },
      { description: 'What is returned; a list given replaces the old one' },
    ),
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
    item_id: column.integer({
      readOnly: true,
      min: 1,
      max: MAX_ID,
      description: 'The item of this sku (an items id); null while no item has it',
    }),
    sku: column.string({ readOnly: true, nullable: false, description: 'The sku counted' }),
    warehouse: column.string({
      readOnly: true,
      maxLength: 100,
      description: 'The warehouse it is counted in',
    }),
    on_hand: column.integer({
      ...STOCK_TOTAL,
      description: 'Units in the warehouse: adjustments and receipts add, shipments take',
    }),
    committed: column.integer({
      ...STOCK_TOTAL,
      description: 'Units promised to open fulfillment orders and not yet shipped',
    }),
    available: column.integer({ ...STOCK_TOTAL, description: 'Derived: on_hand - committed' }),
    inbound: column.integer({
      ...STOCK_TOTAL,
      description: 'Units on open purchase orders not yet received',
    }),
    // By sku rather than item_id: an item created after its stock was counted is still found.
    item: joined(() => items, {
      column: 'sku',
      targetColumn: 'sku',
      description: 'The item of the same sku, for `q` (`item.name`); not in the record',
    }),
  },
});

export const inventoryAdjustments = defineModel({
  name: 'inventory_adjustments',
  singular: 'inventory_adjustment',
  writeScope: 'write',
  writes: 'append-only',
  fields: {
    sku: column.string({ required: true, description: 'The sku adjusted' }),
    warehouse: column.string({ maxLength: 100, description: 'The warehouse whose stock it adjusts' }),
    quantity_delta: column.integer({
      required: true,
      description: 'Units added to `on_hand` (negative: taken away), a 32-bit integer',
    }),
    reason: column.string({ maxLength: 1000, description: 'Why (`cycle count`, `damaged`)' }),
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
