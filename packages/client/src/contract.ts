import type { Int64 } from './int64.js';
import type { Assert, Equal, ObjectShape, Shaped } from './shape.js';

export type { FieldShape, FieldType, ObjectShape } from './shape.js';

/**
 * What this client holds the Plant Store API to be: the operations it calls, the parameters it
 * sends and the shapes it writes and reads. test/contract.test.ts checks every entry against the
 * document the server serves at GET /openapi.json, and the type assertions at the end tie the
 * exported types to these entries at compile time: the server, this table and the types cannot
 * drift apart without a failing check.
 */

/** The three schemas of the contract (components.schemas), field by field. */
export const SHAPES = {
  Plant: {
    name: { type: 'string', required: true },
    tag: { type: 'string', required: false },
  },
  NewPlant: {
    id: { type: 'integer', format: 'int64', required: true },
    name: { type: 'string', required: true },
    tag: { type: ['string', 'null'], required: false },
  },
  Error: {
    error: { type: 'integer', format: 'int32', required: true },
    message: { type: 'string', required: true },
  },
} as const satisfies Record<string, ObjectShape>;

/** `limit` on GET /plants. */
export const LIMIT = { min: 1, max: 1000, default: 100 } as const;

/** The operations this client calls, by operationId, with the one success status each answers. */
export const OPERATIONS = {
  addPlant: { method: 'POST', path: '/plants', body: 'NewPlant', success: 200, response: 'Plant' },
  findPlants: {
    method: 'GET',
    path: '/plants',
    query: ['limit', 'cursor', 'tag'],
    success: 200,
    response: 'Plant[]',
    // The next page is found through this header (RFC 8288), not the body.
    headers: ['Link'],
  },
  deletePlant: { method: 'DELETE', path: '/plants/{id}', params: ['id'], success: 204 },
  // The change feed as pages of JSON (Accept: application/json); the same operation streams
  // Server-Sent Events to other clients, which this client does not read.
  streamEvents: {
    method: 'GET',
    path: '/events',
    query: ['after', 'types', 'limit'],
    success: 200,
    response: 'Event[]',
    headers: ['Link'],
  },
  // A single-use ticket of 60 s for GET /events?ticket= (interface 1.3.0): what a browser's
  // EventSource opens a stream with. Asking twice makes two tickets, no harm: safe to repeat.
  createEventTicket: { method: 'POST', path: '/events/tickets', success: 201, response: 'EventTicket' },
  // Webhooks (interface 1.1.0 and 1.2.0); their shapes are WEBHOOK_SHAPES (webhook-contract.ts).
  // `idempotent: false`: sending it twice does it twice, so it is never sent again once it may have
  // reached the server (client.ts); every other operation is safe to repeat.
  createWebhook: {
    method: 'POST',
    path: '/webhooks',
    body: 'NewWebhook',
    success: 201,
    response: 'CreatedWebhook',
    idempotent: false,
  },
  listWebhooks: { method: 'GET', path: '/webhooks', success: 200, response: 'Webhook[]' },
  updateWebhook: {
    method: 'PATCH',
    path: '/webhooks/{id}',
    params: ['id'],
    body: 'WebhookPatch',
    success: 200,
    response: 'Webhook',
  },
  deleteWebhook: { method: 'DELETE', path: '/webhooks/{id}', params: ['id'], success: 204 },
  rotateWebhookSecret: {
    method: 'POST',
    path: '/webhooks/{id}/secret',
    params: ['id'],
    body: 'RotateSecret',
    success: 200,
    response: 'RotatedWebhook',
    idempotent: false,
  },
  pingWebhook: {
    method: 'POST',
    path: '/webhooks/{id}/ping',
    params: ['id'],
    success: 202,
    response: 'PingDelivery',
    idempotent: false,
  },
  recoverDeliveries: {
    method: 'POST',
    path: '/webhooks/{id}/recover',
    params: ['id'],
    body: 'Recover',
    success: 202,
    response: 'Recovered',
  },
  enableWebhook: { method: 'POST', path: '/webhooks/{id}/enable', params: ['id'], success: 200, response: 'Webhook' },
  listDeliveries: {
    method: 'GET',
    path: '/webhooks/{id}/deliveries',
    params: ['id'],
    query: ['limit', 'before'],
    success: 200,
    response: 'Delivery[]',
    // The next page (older deliveries) is found through this header, as for the plants.
    headers: ['Link'],
  },
  retryDelivery: {
    method: 'POST',
    path: '/webhooks/{id}/deliveries/{deliveryId}/retry',
    params: ['id', 'deliveryId'],
    success: 202,
  },
  listDeliveryAttempts: {
    method: 'GET',
    path: '/webhooks/{id}/deliveries/{deliveryId}/attempts',
    params: ['id', 'deliveryId'],
    success: 200,
    response: 'DeliveryAttempt[]',
  },
  getWebhookActivity: {
    method: 'GET',
    path: '/webhooks/{id}/activity',
    params: ['id'],
    success: 200,
    response: 'WebhookActivity',
  },
} as const;

export type OperationId = keyof typeof OPERATIONS;
export type ListQueryName = (typeof OPERATIONS.findPlants.query)[number];
export type EventsQueryName = (typeof OPERATIONS.streamEvents.query)[number];

/** The event types of the feed. */
export const EVENT_TYPES = ['plant.created', 'plant.deleted'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** `limit` on GET /events as JSON pages. */
export const EVENT_LIMIT = { min: 1, max: 1000, default: 100 } as const;

/**
 * An item of a page of events, field by field (the server declares it inline, under GET /events's
 * application/json answer), and its `data`: the payload as the stream and webhooks carry it.
 */
export const EVENT_SHAPES = {
  Event: {
    id: { type: 'integer', format: 'int64', required: true },
    type: { type: 'string', values: EVENT_TYPES, required: true },
    data: { type: 'object', required: true },
    createdAt: { type: 'string', format: 'date-time', required: true },
  },
  EventData: {
    id: { type: 'integer', format: 'int64', required: true },
    name: { type: 'string', required: false },
    tag: { type: 'string', required: false },
  },
  EventTicket: {
    ticket: { type: 'string', required: true },
    expiresAt: { type: 'string', format: 'date-time', required: true },
  },
} as const satisfies Record<string, ObjectShape>;

/** POST /events/tickets (interface 1.3.0): `GET /events?ticket=<ticket>` opens one stream with it. */
export interface EventTicket {
  /** Single-use; a secret while it lasts. */
  ticket: string;
  /** RFC 3339: when it can no longer open a stream (60 s after it was made). */
  expiresAt: string;
}

/**
 * One event of the change feed, ids exact. `data` is the payload: the plant as created (`tag` only
 * when it has one), or the id of the plant deleted.
 */
export type FeedEvent =
  | { id: bigint; type: 'plant.created'; data: { id: bigint; name: string; tag?: string }; createdAt: string }
  | { id: bigint; type: 'plant.deleted'; data: { id: bigint }; createdAt: string };

/** A plant as the server answers it. It carries no id: the API never returns one. */
export interface Plant {
  name: string;
  /** Present only when the plant has a tag. */
  tag?: string;
}

/** A plant to create. `id` is an int64, exact: a bigint or decimal text, never a number. */
export interface NewPlant {
  id: Int64;
  name: string;
  /** Omitted or `null`: no tag. */
  tag?: string | null;
}

/** The body of every error answer. */
export interface ErrorBody {
  /** The HTTP status code. */
  error: number;
  message: string;
}

// Compile-time ties between the interfaces above and SHAPES (which the test ties to the server).
type _ShapesMatchTypes = [
  Assert<Equal<Plant, Shaped<typeof SHAPES.Plant, Int64>>>,
  Assert<Equal<NewPlant, Shaped<typeof SHAPES.NewPlant, Int64>>>,
  Assert<Equal<ErrorBody, Shaped<typeof SHAPES.Error, Int64>>>,
  Assert<Equal<EventTicket, Shaped<typeof EVENT_SHAPES.EventTicket, Int64>>>,
];
