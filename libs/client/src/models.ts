// Generated from docs/openapi.json by scripts/models.mjs (npm run describe): do not edit.
import type { components } from './openapi.js';

type S = components['schemas'];

/**
 * Every model the API serves, by its name in paths (`/v2/people`): its search's `q`, its record as
 * reads answer it, the bodies of its create and update and what a create answers (`never` where the
 * model takes none), and whether it may be deleted.
 */
export interface Models {
  phone_number_types: {
    query: S['PhoneNumberTypesQuery'];
    record: S['PhoneNumberType'];
    create: S['PhoneNumberTypeCreate'];
    created: S['PhoneNumberType'];
    update: S['PhoneNumberTypeUpdate'];
    deletable: true;
  };
  people: {
    query: S['PeopleQuery'];
    record: S['Person'];
    create: S['PersonCreate'];
    created: S['Person'];
    update: S['PersonUpdate'];
    deletable: true;
  };
  items: {
    query: S['ItemsQuery'];
    record: S['Item'];
    create: S['ItemCreate'];
    created: S['Item'];
    update: S['ItemUpdate'];
    deletable: true;
  };
  orders: {
    query: S['OrdersQuery'];
    record: S['Order'];
    create: S['OrderCreate'];
    created: S['Order'];
    update: S['OrderUpdate'];
    deletable: true;
  };
  fulfillment_orders: {
    query: S['FulfillmentOrdersQuery'];
    record: S['FulfillmentOrder'];
    create: S['FulfillmentOrderCreate'];
    created: S['FulfillmentOrder'];
    update: S['FulfillmentOrderUpdate'];
    deletable: true;
  };
  shipments: {
    query: S['ShipmentsQuery'];
    record: S['Shipment'];
    create: S['ShipmentCreate'];
    created: S['Shipment'];
    update: S['ShipmentUpdate'];
    deletable: false;
  };
  purchase_orders: {
    query: S['PurchaseOrdersQuery'];
    record: S['PurchaseOrder'];
    create: S['PurchaseOrderCreate'];
    created: S['PurchaseOrder'];
    update: S['PurchaseOrderUpdate'];
    deletable: true;
  };
  invoices: {
    query: S['InvoicesQuery'];
    record: S['Invoice'];
    create: S['InvoiceCreate'];
    created: S['Invoice'];
    update: S['InvoiceUpdate'];
    deletable: false;
  };
  returns: {
    query: S['ReturnsQuery'];
    record: S['Return'];
    create: S['ReturnCreate'];
    created: S['Return'];
    update: S['ReturnUpdate'];
    deletable: true;
  };
  inventory: {
    query: S['InventoryQuery'];
    record: S['Inventory'];
    create: never;
    created: never;
    update: never;
    deletable: false;
  };
  inventory_adjustments: {
    query: S['InventoryAdjustmentsQuery'];
    record: S['InventoryAdjustment'];
    create: S['InventoryAdjustmentCreate'];
    created: S['InventoryAdjustment'];
    update: never;
    deletable: false;
  };
  webhooks: {
    query: S['WebhooksQuery'];
    record: S['Webhook'];
    create: S['WebhookCreate'];
    created: S['WebhookWithSecret'];
    update: S['WebhookUpdate'];
    deletable: true;
  };
  webhook_deliveries: {
    query: S['WebhookDeliveriesQuery'];
    record: S['WebhookDelivery'];
    create: never;
    created: never;
    update: never;
    deletable: false;
  };
}

/** Every event type, with the body its webhook deliveries and the events feed carry. */
export interface Events {
  'phone_number_type.created': S['PhoneNumberTypeCreatedEvent'];
  'phone_number_type.updated': S['PhoneNumberTypeUpdatedEvent'];
  'phone_number_type.deleted': S['PhoneNumberTypeDeletedEvent'];
  'person.created': S['PersonCreatedEvent'];
  'person.updated': S['PersonUpdatedEvent'];
  'person.deleted': S['PersonDeletedEvent'];
  'item.created': S['ItemCreatedEvent'];
  'item.updated': S['ItemUpdatedEvent'];
  'item.deleted': S['ItemDeletedEvent'];
  'order.created': S['OrderCreatedEvent'];
  'order.updated': S['OrderUpdatedEvent'];
  'order.deleted': S['OrderDeletedEvent'];
  'order.cancelled': S['OrderCancelledEvent'];
  'fulfillment_order.created': S['FulfillmentOrderCreatedEvent'];
  'fulfillment_order.updated': S['FulfillmentOrderUpdatedEvent'];
  'fulfillment_order.deleted': S['FulfillmentOrderDeletedEvent'];
  'fulfillment_order.shipped': S['FulfillmentOrderShippedEvent'];
  'fulfillment_order.cancelled': S['FulfillmentOrderCancelledEvent'];
  'shipment.created': S['ShipmentCreatedEvent'];
  'shipment.updated': S['ShipmentUpdatedEvent'];
  'shipment.tracking_updated': S['ShipmentTrackingUpdatedEvent'];
  'shipment.delivered': S['ShipmentDeliveredEvent'];
  'purchase_order.created': S['PurchaseOrderCreatedEvent'];
  'purchase_order.updated': S['PurchaseOrderUpdatedEvent'];
  'purchase_order.deleted': S['PurchaseOrderDeletedEvent'];
  'purchase_order.received': S['PurchaseOrderReceivedEvent'];
  'invoice.created': S['InvoiceCreatedEvent'];
  'invoice.updated': S['InvoiceUpdatedEvent'];
  'invoice.paid': S['InvoicePaidEvent'];
  'return.created': S['ReturnCreatedEvent'];
  'return.updated': S['ReturnUpdatedEvent'];
  'return.deleted': S['ReturnDeletedEvent'];
  'return.received': S['ReturnReceivedEvent'];
  'inventory.created': S['InventoryCreatedEvent'];
  'inventory.updated': S['InventoryUpdatedEvent'];
  'inventory_adjustment.created': S['InventoryAdjustmentCreatedEvent'];
  'webhook.created': S['WebhookCreatedEvent'];
  'webhook.updated': S['WebhookUpdatedEvent'];
  'webhook.deleted': S['WebhookDeletedEvent'];
  'webhook.disabled': S['WebhookDisabledEvent'];
  'webhook.test': S['WebhookTestEvent'];
  'webhook.delivery_failed': S['WebhookDeliveryFailedEvent'];
}
