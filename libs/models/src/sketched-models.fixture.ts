// Sketches of the models still to be written into the registry, used by tests to prove that the
// registry's types carry them: embedded addresses, lines, packages with their own lines, column
// references, derived columns and state machines. Not exported from the package.
import { column, defineModel, embedded, list, type FieldMap } from './fields.js';
import { items, people } from './registry.js';

const CURRENCY = { regex: /^[A-Z]{3}$/, message: 'must be an ISO 4217 currency code such as USD' };

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
  fields: {
    order_number: column.string({ required: true, unique: true }),
    status: column.string({
      values: ['pending', 'open', 'on_hold', 'partially_fulfilled', 'fulfilled', 'cancelled'],
    }),
    customer_id: column.integer({ references: () => people }),
    currency: column.string({ pattern: CURRENCY }),
    total: column.decimal({ scale: 2, readOnly: true }),
    requested_ship_date: column.date(),
    anticipated_ship_date: column.date(),
    shipping_method: column.string(),
    notes: column.string({ maxLength: 4000 }),
    ship_to: embedded(address),
    lines: list({
      item_id: column.integer({ references: () => items }),
      sku: column.string({ required: true }),
      quantity: column.integer({ required: true, min: 1 }),
      unit_price: column.decimal({ scale: 2, min: 0 }),
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

export const shipments = defineModel({
  name: 'shipments',
  singular: 'shipment',
  writeScope: 'operations',
  fields: {
    fulfillment_order_id: column.integer({ required: true }),
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
      weight: column.decimal({ scale: 3, min: 0 }),
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

export const invoices = defineModel({
  name: 'invoices',
  singular: 'invoice',
  writeScope: 'operations',
  deletable: false,
  fields: {
    invoice_number: column.string({ required: true, unique: true }),
    order_id: column.integer({ references: () => orders }),
    status: column.string({ values: ['open', 'partially_paid', 'paid', 'void'] }),
    currency: column.string({ pattern: CURRENCY }),
    issue_date: column.date(),
    due_date: column.date(),
    total: column.decimal({ scale: 2, readOnly: true }),
    amount_paid: column.decimal({ scale: 2, min: 0, default: '0.00' }),
    amount_due: column.decimal({ scale: 2, readOnly: true }),
    lines: list({
      description: column.string(),
      sku: column.string(),
      quantity: column.integer({ required: true, min: 1 }),
      unit_price: column.decimal({ scale: 2, required: true }),
      amount: column.decimal({ scale: 2, readOnly: true }),
    }),
  },
  stateMachine: {
    column: 'status',
    initial: 'open',
    transitions: { open: ['partially_paid', 'paid', 'void'], partially_paid: ['paid'] },
    derived: ['partially_paid', 'paid'],
  },
});
