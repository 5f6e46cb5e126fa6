import {
  inventoryAdjustments,
  items,
  MODELS,
  people,
  phoneNumberTypes,
  type ModelDefinition,
  type ModelName,
} from '@ofp/models';
import { fulfillmentOrderRules, shipmentRules } from './fulfillment.js';
import { inventoryRules } from './inventory.js';
import { invoiceRules } from './invoices.js';
import { orderRules } from './orders.js';
import { purchaseOrderRules } from './purchase-orders.js';
import { plainRules, type RecordRules } from './record-rules.js';
import { returnRules } from './returns.js';

/** Every model's rules: its own, or plain CRUD rules (a new model fails to compile until it is here). */
const RULES: Readonly<Record<ModelName, RecordRules>> = {
  phone_number_types: plainRules(phoneNumberTypes),
  people: plainRules(people),
  items: plainRules(items),
  orders: orderRules,
  fulfillment_orders: fulfillmentOrderRules,
  shipments: shipmentRules,
  purchase_orders: purchaseOrderRules,
  invoices: invoiceRules,
  returns: returnRules,
  inventory: inventoryRules,
  inventory_adjustments: plainRules(inventoryAdjustments),
};

/** A model's domain rules. @throws Error for a model that is not the registry's. */
export function rulesOf(model: ModelDefinition): RecordRules {
  const name = model.name as ModelName;
  if (MODELS[name] !== model) throw new Error(`${model.name} is not a model of the registry`);
  return RULES[name];
}
