import type { ModelDefinition } from '@ofp/models';
import { fulfillmentOrderRules, shipmentRules } from './fulfillment.js';
import { inventoryRules } from './inventory.js';
import { invoiceRules } from './invoices.js';
import { orderRules } from './orders.js';
import { purchaseOrderRules } from './purchase-orders.js';
import { plainRules, type RecordRules } from './record-rules.js';
import { returnRules } from './returns.js';

const RULES: Readonly<Record<string, RecordRules>> = {
  orders: orderRules,
  fulfillment_orders: fulfillmentOrderRules,
  shipments: shipmentRules,
  purchase_orders: purchaseOrderRules,
  invoices: invoiceRules,
  returns: returnRules,
  inventory: inventoryRules,
};

/** A model's domain rules; plain CRUD rules for models without their own. */
export function rulesOf(model: ModelDefinition): RecordRules {
  return Object.hasOwn(RULES, model.name) ? RULES[model.name]! : plainRules(model);
}
