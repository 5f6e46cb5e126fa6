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
import { WHITESPACE } from './formats.js';

// The model registry (API.md §6). Each model is declared here once.

/** The phone number types every organization has from the start (API.md §6). */
export const PHONE_NUMBER_TYPE_SEEDS = ['Work', 'Home', 'Mobile', 'Fax'] as const;

export const phoneNumberTypes = defineModel({
  name: 'phone_number_types',
  singular: 'phone_number_type',
  writeScope: 'write',
  example: {
    record: {
      id: 5,
      name: 'Warehouse',
      external_id: null,
      created_at: '2026-11-20T09:15:00.000Z',
      updated_at: '2026-11-21T07:30:00.000Z',
      version: 2,
    },
    update: { name: 'Warehouse' },
    previous: { name: 'Depot' },
  },
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
  example: {
    record: {
      id: 1042,
      first_name: 'Ada',
      last_name: 'Lovelace',
      email: 'ada@example.com',
      company: 'Analytical Engines Ltd',
      phone_numbers: [
        { number: '4155550123', phone_number_type: { id: 1, name: 'Work' } },
        { number: '4155550188', phone_number_type: { id: 3, name: 'Mobile' } },
      ],
      external_id: 'CRM-CUST-00042',
      created_at: '2026-11-20T09:15:00.000Z',
      updated_at: '2026-11-21T07:30:00.000Z',
      version: 2,
    },
    update: { email: 'ada@example.com' },
    previous: { email: 'ada.lovelace@example.org' },
  },
  fields: {
    first_name: column.string({ description: 'Given name' }),
    last_name: column.string({ required: true, description: 'Family name, the one name a person needs' }),
    email: column.string({
      // The NUL is refused on purpose (Postgres text cannot hold one), written as schemathesis reads it,
      // and the whitespace written out (WHITESPACE), which `\s` would leave to each reader's meaning.
      pattern: {
        regex: new RegExp(`^[^@${WHITESPACE}\\u0000]+@[^@${WHITESPACE}\\u0000]+$`),
        message: 'must be an email address',
      },
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
  example: {
    record: {
      id: 3001,
      sku: 'TSHIRT-BLK-M',
      name: 'Organic T-shirt, black, M',
      description: 'Crew neck, 100% organic cotton, 180 g/m²',
      barcode: '0012345678905',
      unit_of_measure: 'each',
      weight: '0.180',
      weight_unit: 'kg',
      price: '24.00',
      currency: 'USD',
      active: true,
      external_id: 'ERP-ITEM-3001',
      created_at: '2026-11-20T09:15:00.000Z',
      updated_at: '2026-11-21T07:30:00.000Z',
      version: 3,
    },
    update: { price: '24.00' },
    previous: { price: '22.00' },
  },
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

/** The address of the examples. */
const EXAMPLE_SHIP_TO = {
  name: 'Ada Lovelace',
  company: 'Analytical Engines Ltd',
  address1: '500 Howard St',
  address2: 'Suite 300',
  city: 'San Francisco',
  state: 'CA',
  postal_code: '94105',
  country: 'US',
  phone: '4155550123',
  email: 'ada@example.com',
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
  example: {
    record: {
      id: 5120,
      order_number: 'SO-2026-005120',
      status: 'open',
      customer_id: 1042,
      currency: 'USD',
      total: '61.50',
      requested_ship_date: '2026-11-24',
      anticipated_ship_date: '2026-11-23',
      shipping_method: 'UPS Ground',
      notes: 'Leave at the front desk',
      ship_to: EXAMPLE_SHIP_TO,
      lines: [
        { item_id: 3001, sku: 'TSHIRT-BLK-M', quantity: 2, unit_price: '24.00' },
        { item_id: 3002, sku: 'MUG-WHT', quantity: 1, unit_price: '13.50' },
      ],
      external_id: 'SHOP-1001',
      created_at: '2026-11-20T09:15:00.000Z',
      updated_at: '2026-11-21T07:30:00.000Z',
      version: 2,
    },
    update: { status: 'open' },
    previous: { status: 'pending' },
    events: { 'order.cancelled': { record: { status: 'cancelled' }, previous: { status: 'open' } } },
  },
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
  example: {
    record: {
      id: 7001,
      order_id: 5120,
      warehouse: 'SFO-1',
      status: 'in_progress',
      requested_ship_date: '2026-11-24',
      anticipated_ship_date: '2026-11-23',
      shipping_method: 'UPS Ground',
      ship_to: EXAMPLE_SHIP_TO,
      lines: [
        { sku: 'TSHIRT-BLK-M', quantity: 2, quantity_shipped: 0 },
        { sku: 'MUG-WHT', quantity: 1, quantity_shipped: 0 },
      ],
      external_id: 'WMS-FO-7001',
      created_at: '2026-11-20T09:15:00.000Z',
      updated_at: '2026-11-21T07:30:00.000Z',
      version: 2,
    },
    update: { status: 'in_progress' },
    previous: { status: 'open' },
    events: {
      'fulfillment_order.shipped': {
        record: {
          status: 'shipped',
          lines: [
            { sku: 'TSHIRT-BLK-M', quantity: 2, quantity_shipped: 2 },
            { sku: 'MUG-WHT', quantity: 1, quantity_shipped: 1 },
          ],
        },
        previous: {
          status: 'in_progress',
          lines: [
            { sku: 'TSHIRT-BLK-M', quantity: 2, quantity_shipped: 0 },
            { sku: 'MUG-WHT', quantity: 1, quantity_shipped: 0 },
          ],
        },
      },
      'fulfillment_order.cancelled': { record: { status: 'cancelled' }, previous: { status: 'in_progress' } },
    },
  },
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
  example: {
    record: {
      id: 9001,
      fulfillment_order_id: 7001,
      status: 'in_transit',
      carrier: 'UPS',
      service: 'Ground',
      shipped_at: '2026-11-23T16:05:00.000Z',
      estimated_delivery_at: '2026-11-26T20:00:00.000Z',
      delivered_at: null,
      packages: [
        {
          tracking_number: '1Z999AA10123456784',
          tracking_url: 'https://www.ups.com/track?tracknum=1Z999AA10123456784',
          weight: '0.950',
          lines: [
            { sku: 'TSHIRT-BLK-M', quantity: 2 },
            { sku: 'MUG-WHT', quantity: 1 },
          ],
        },
      ],
      external_id: 'WMS-SHP-9001',
      created_at: '2026-11-23T15:40:00.000Z',
      updated_at: '2026-11-23T16:05:00.000Z',
      version: 2,
    },
    update: { service: 'Ground' },
    previous: { service: '3 Day Select' },
    events: {
      'shipment.tracking_updated': {
        record: { estimated_delivery_at: '2026-11-25T20:00:00.000Z' },
        previous: { estimated_delivery_at: '2026-11-26T20:00:00.000Z' },
      },
      'shipment.delivered': {
        record: { status: 'delivered', delivered_at: '2026-11-25T18:12:00.000Z' },
        previous: { status: 'in_transit', delivered_at: null },
      },
    },
  },
  // A shipment counts as shipped from its creation: it is cancelled, never deleted (API.md §6).
  deletable: false,
  instead: 'a shipment is cancelled instead: PUT {"status": "cancelled"}',
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
  example: {
    record: {
      id: 4100,
      po_number: 'PO-2026-0412',
      vendor_name: 'Evergreen Textiles',
      warehouse: 'SFO-1',
      status: 'partially_received',
      expected_arrival_date: '2026-12-02',
      currency: 'USD',
      total: '1450.00',
      lines: [
        { sku: 'TSHIRT-BLK-M', quantity: 200, quantity_received: 120, unit_cost: '6.50' },
        { sku: 'TSHIRT-BLK-L', quantity: 50, quantity_received: 0, unit_cost: '3.00' },
      ],
      external_id: 'ERP-PO-0412',
      created_at: '2026-11-20T09:15:00.000Z',
      updated_at: '2026-11-21T07:30:00.000Z',
      version: 3,
    },
    update: {
      lines: [
        { sku: 'TSHIRT-BLK-M', quantity: 200, quantity_received: 120, unit_cost: '6.50' },
        { sku: 'TSHIRT-BLK-L', quantity: 50, quantity_received: 0, unit_cost: '3.00' },
      ],
    },
    previous: {
      status: 'open',
      lines: [
        { sku: 'TSHIRT-BLK-M', quantity: 200, quantity_received: 0, unit_cost: '6.50' },
        { sku: 'TSHIRT-BLK-L', quantity: 50, quantity_received: 0, unit_cost: '3.00' },
      ],
    },
    events: {
      'purchase_order.received': {
        record: {
          status: 'received',
          lines: [
            { sku: 'TSHIRT-BLK-M', quantity: 200, quantity_received: 200, unit_cost: '6.50' },
            { sku: 'TSHIRT-BLK-L', quantity: 50, quantity_received: 50, unit_cost: '3.00' },
          ],
        },
        previous: {
          status: 'partially_received',
          lines: [
            { sku: 'TSHIRT-BLK-M', quantity: 200, quantity_received: 120, unit_cost: '6.50' },
            { sku: 'TSHIRT-BLK-L', quantity: 50, quantity_received: 0, unit_cost: '3.00' },
          ],
        },
      },
    },
  },
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
  example: {
    record: {
      id: 6001,
      invoice_number: 'INV-2026-0815',
      order_id: 5120,
      purchase_order_id: null,
      status: 'partially_paid',
      currency: 'USD',
      issue_date: '2026-11-23',
      due_date: '2026-12-23',
      total: '61.50',
      amount_paid: '30.00',
      amount_due: '31.50',
      lines: [
        {
          description: 'Organic T-shirt, black, M',
          sku: 'TSHIRT-BLK-M',
          quantity: 2,
          unit_price: '24.00',
          amount: '48.00',
        },
        { description: 'Mug, white', sku: 'MUG-WHT', quantity: 1, unit_price: '13.50', amount: '13.50' },
      ],
      external_id: 'ERP-INV-0815',
      created_at: '2026-11-23T17:00:00.000Z',
      updated_at: '2026-11-24T09:45:00.000Z',
      version: 2,
    },
    update: { amount_paid: '30.00' },
    previous: { status: 'open', amount_paid: '0.00', amount_due: '61.50' },
    events: {
      'invoice.paid': {
        record: { status: 'paid', amount_paid: '61.50', amount_due: '0.00' },
        previous: { status: 'partially_paid', amount_paid: '30.00', amount_due: '31.50' },
      },
    },
  },
  deletable: false,
  instead: 'an invoice is voided instead: PUT {"status": "void"}',
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
  example: {
    record: {
      id: 2301,
      rma_number: 'RMA-2026-0077',
      order_id: 5120,
      warehouse: 'SFO-1',
      status: 'authorized',
      reason: 'Wrong size',
      received_at: null,
      lines: [{ sku: 'TSHIRT-BLK-M', quantity: 1, quantity_received: 0, disposition: 'restock' }],
      external_id: 'SHOP-RET-311',
      created_at: '2026-11-26T10:00:00.000Z',
      updated_at: '2026-11-26T11:20:00.000Z',
      version: 2,
    },
    update: { status: 'authorized' },
    previous: { status: 'requested' },
    events: {
      'return.received': {
        record: {
          status: 'received',
          received_at: '2026-11-28T14:03:00.000Z',
          lines: [{ sku: 'TSHIRT-BLK-M', quantity: 1, quantity_received: 1, disposition: 'restock' }],
        },
        previous: {
          status: 'authorized',
          received_at: null,
          lines: [{ sku: 'TSHIRT-BLK-M', quantity: 1, quantity_received: 0, disposition: 'restock' }],
        },
      },
    },
  },
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
  example: {
    record: {
      id: 8001,
      item_id: 3001,
      sku: 'TSHIRT-BLK-M',
      warehouse: 'SFO-1',
      on_hand: 118,
      committed: 2,
      available: 116,
      inbound: 80,
      external_id: null,
      created_at: '2026-11-02T08:00:00.000Z',
      updated_at: '2026-11-23T16:05:00.000Z',
      version: 14,
    },
    previous: { on_hand: 120, committed: 4 },
  },
  // Derived from events by the inventory process manager (API.md §6); no client writes it.
  writes: 'read-only',
  instead: 'inventory changes through POST /v2/inventory_adjustments',
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
  example: {
    record: {
      id: 2201,
      sku: 'TSHIRT-BLK-M',
      warehouse: 'SFO-1',
      quantity_delta: -2,
      reason: 'Damaged, found in cycle count',
      external_id: 'CC-2026-11-22-07',
      created_at: '2026-11-22T18:30:00.000Z',
      updated_at: '2026-11-22T18:30:00.000Z',
      version: 1,
    },
    previous: {},
  },
  writes: 'append-only',
  instead: 'an adjustment is corrected by another one: POST /v2/inventory_adjustments',
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

/**
 * Every model of the registry, by endpoint name. Its keys are the models' names (`ModelName`): a
 * table with an entry per model (`Record<ModelName, ...>`, the api's rules, the inventory's effects)
 * fails to compile until a new model is handled there.
 */
export const MODELS = {
  phone_number_types: phoneNumberTypes,
  people,
  items,
  orders,
  fulfillment_orders: fulfillmentOrders,
  shipments,
  purchase_orders: purchaseOrders,
  invoices,
  returns,
  inventory,
  inventory_adjustments: inventoryAdjustments,
} as const satisfies Readonly<Record<string, ModelDefinition>>;

/** The name of a model of the registry: its endpoint `/v2/<name>` and its stream type. */
export type ModelName = keyof typeof MODELS;

for (const [name, model] of Object.entries(MODELS)) {
  if (model.name !== name) throw new Error(`MODELS.${name} holds the model ${model.name}`);
}

/** Whether `name` is a model of the registry. */
export function isModelName(name: string): name is ModelName {
  return Object.hasOwn(MODELS, name);
}

/** The model served at `/v2/<name>`, or `undefined` for an unknown name. */
export function findModel(name: string): ModelDefinition | undefined {
  return isModelName(name) ? MODELS[name] : undefined;
}
