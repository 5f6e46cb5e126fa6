export * from './module.js';
export { webhookDeliveries, webhooks } from './models.js';
export {
  DEFAULT_LIMITS,
  webhookDispatcherConfigShape,
  webhookDispatcherSettings,
  webhookDispatcherSettingsIssues,
  type DeliveryLimits,
} from './config.js';
export type { HostResolver, ResolvedAddress } from './delivery/address-guard.js';
export type { HttpSender, OutgoingDelivery } from './delivery/http-sender.js';
export { EVENT_TYPES, eventCatalog } from './subscriptions/event-catalog.js';
export { INTAKE_GROUP, intakeStreamTypes } from './delivery/event-intake.js';
