export {
  PlantStoreClient,
  type CallOptions,
  type EventsOptions,
  type ListOptions,
  type Page,
  type PlantStoreClientOptions,
  type RetryEvent,
} from './client.js';
export {
  EVENT_LIMIT,
  EVENT_TYPES,
  LIMIT,
  OPERATIONS,
  SHAPES,
  type ErrorBody,
  type EventTicket,
  type EventType,
  type FeedEvent,
  type NewPlant,
  type OperationId,
  type Plant,
} from './contract.js';
export type { EventsPage, EventsPageOptions } from './events.js';
export {
  DELIVERY_LIMIT,
  WEBHOOK_SHAPES,
  type Delivery,
  type DeliveryAttempt,
  type DeliveryStatus,
  type DeliveryType,
  type Destination,
  type DisabledReason,
  type NewWebhook,
  type PingDelivery,
  type Recovered,
  type Webhook,
  type WebhookActivity,
  type WebhookActivityHour,
  type WebhookPatch,
  type WebhookStatus,
  type WebhookWithSecret,
} from './webhook-contract.js';
export type { Webhooks, DeliveriesOptions, DeliveriesPage, RecoverOptions, RotateOptions } from './webhooks.js';
export { PlantStoreError, PlantStoreNetworkError } from './errors.js';
export { INT64_MAX, INT64_MIN, type Int64, isInt64, toInt64 } from './int64.js';
export { DEFAULT_RETRY_POLICY, RETRY_STATUSES, type RetryPolicy } from './retry.js';
