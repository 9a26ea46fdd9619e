import { EVENT_TYPES, type EventType } from './contract.js';
import type { Assert, Equal, ObjectShape, Shaped, Simplify } from './shape.js';

/**
 * The webhook shapes of the Plant Store API (interface 1.1.0 and 1.2.0), field by field, as
 * src/contract.ts holds the plant ones: test/contract.test.ts checks each against the document
 * the server serves (components.schemas by name; PingDelivery, RotateSecret, Recover and Recovered
 * are declared inline under their operation), and the type ties at the end hold the exported
 * types to them. Times stay RFC 3339 text, as the server sends them and as `FeedEvent.createdAt` is.
 */

export const WEBHOOK_STATUSES = ['active', 'disabled'] as const;
export const DISABLED_REASONS = ['gone', 'failing', 'manual'] as const;
export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
export const PING_TYPE = 'webhook.ping';
export const DELIVERY_TYPES = [...EVENT_TYPES, PING_TYPE] as const;
/** `limit` on GET /webhooks/{id}/deliveries: the newest this many. */
export const DELIVERY_LIMIT = { min: 1, max: 1000, default: 100 } as const;

const eventTypes = { type: 'array', items: { type: 'string', values: EVENT_TYPES } } as const;
const time = { type: 'string', format: 'date-time', required: true } as const;
const timeOrNull = { type: ['string', 'null'], format: 'date-time', required: true } as const;

const WEBHOOK = {
  id: { type: 'string', required: true },
  url: { type: ['string', 'null'], required: true },
  destination: { type: ['object', 'null'], required: true },
  events: { ...eventTypes, required: true },
  status: { type: 'string', values: WEBHOOK_STATUSES, required: true },
  description: { type: 'string', required: true },
  failingSince: timeOrNull,
  disabledReason: { type: ['string', 'null'], values: DISABLED_REASONS, required: true },
  previousSecretExpiresAt: timeOrNull,
  createdAt: time,
} as const;

const DELIVERY = {
  id: { type: 'integer', format: 'int64', required: true },
  type: { type: 'string', values: DELIVERY_TYPES, required: true },
  eventId: { type: ['integer', 'null'], format: 'int64', required: true },
  status: { type: 'string', values: DELIVERY_STATUSES, required: true },
  attempts: { type: 'integer', required: true },
  lastStatus: { type: ['integer', 'null'], required: true },
  lastError: { type: ['string', 'null'], required: true },
  nextAttemptAt: timeOrNull,
  createdAt: time,
} as const;

export const WEBHOOK_SHAPES = {
  Webhook: WEBHOOK,
  CreatedWebhook: { ...WEBHOOK, secret: { type: 'string', required: true } },
  RotatedWebhook: { ...WEBHOOK, secret: { type: 'string', required: true } },
  NewWebhook: {
    url: { type: 'string', required: false },
    destination: { type: 'object', required: false },
    events: { ...eventTypes, required: false },
    description: { type: 'string', required: false },
  },
  WebhookPatch: {
    url: { type: 'string', required: false },
    destination: { type: 'object', required: false },
    events: { ...eventTypes, required: false },
    description: { type: 'string', required: false },
    status: { type: 'string', values: WEBHOOK_STATUSES, required: false },
  },
  RotateSecret: { overlapSeconds: { type: 'integer', required: false } },
  Delivery: DELIVERY,
  PingDelivery: {
    ...DELIVERY,
    type: { type: 'string', values: [PING_TYPE], required: true },
    eventId: { type: 'null', required: true },
  },
  DeliveryAttempt: {
    attempt: { type: 'integer', required: true },
    at: time,
    status: { type: ['integer', 'null'], required: true },
    durationMs: { type: 'integer', required: true },
    error: { type: ['string', 'null'], required: true },
    response: { type: ['string', 'null'], required: true },
  },
  Recover: { since: time },
  Recovered: { requeued: { type: 'integer', required: true }, created: { type: 'integer', required: true } },
  // `hours` holds WebhookActivityHour items (the server declares them inline, inside WebhookActivity).
  WebhookActivity: {
    from: time,
    to: time,
    hours: { type: 'array', items: { type: 'object' }, required: true },
  },
  WebhookActivityHour: {
    start: time,
    delivered: { type: 'integer', required: true },
    failed: { type: 'integer', required: true },
  },
} as const satisfies Record<string, ObjectShape>;

export type WebhookStatus = (typeof WEBHOOK_STATUSES)[number];
export type DisabledReason = (typeof DISABLED_REASONS)[number];
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];
export type DeliveryType = (typeof DELIVERY_TYPES)[number];

/**
 * Where a webhook's deliveries are published instead of POSTed (interface 1.4.0): a JetStream
 * subject on a NATS broker, or a routing key on a RabbitMQ broker's allowed exchange, on a broker
 * the server's BROKERS names.
 */
export type Destination = { broker: string; subject: string } | { broker: string; routingKey: string };

/** A subscription to events. Its signing secret is shown only by create and rotateSecret. */
export interface Webhook {
  /** `wh_` and 16 letters and digits. */
  id: string;
  /** Where deliveries are POSTed; null for a destination. */
  url: string | null;
  /** Where deliveries are published; null for a URL. */
  destination: Destination | null;
  events: readonly EventType[];
  status: WebhookStatus;
  description: string;
  /** RFC 3339: the first failed attempt since the last delivered one; null while deliveries succeed. */
  failingSince: string | null;
  /** null while active; why it was disabled: a 410 (`gone`), 5 days of failures, or its owner. */
  disabledReason: DisabledReason | null;
  /** RFC 3339: during a rotation's overlap, when the old secret stops signing; null otherwise. */
  previousSecretExpiresAt: string | null;
  /** RFC 3339, UTC. */
  createdAt: string;
}

/** The webhook just created or rotated, with its signing secret: shown this once. */
export interface WebhookWithSecret extends Webhook {
  /** `whsec_` and base64: what a Standard Webhooks library verifies deliveries with. */
  secret: string;
}

/** A `url` or a `destination`, one of the two. */
export interface NewWebhook {
  /** `https://` and a public host (a server with WEBHOOK_ALLOW_PRIVATE=1 also takes http:// and private ones). */
  url?: string;
  destination?: Destination;
  /** Left out: every event type. */
  events?: readonly EventType[];
  /** At most 200 characters; left out: "". */
  description?: string;
}

/** The fields to change, at least one. */
export interface WebhookPatch {
  url?: string;
  /** A destination's new subject or routing key. */
  destination?: Destination;
  events?: readonly EventType[];
  description?: string;
  /** `disabled` pauses deliveries (disabledReason `manual`); `active` resumes them, as enable does. */
  status?: WebhookStatus;
}

/** One event (or ping) sent, or to be sent, to one webhook. */
export interface Delivery {
  /** int64, exact. */
  id: bigint;
  type: DeliveryType;
  /** The event sent (int64, exact); null for a ping. */
  eventId: bigint | null;
  status: DeliveryStatus;
  attempts: number;
  /** The receiver's last HTTP status; null before an answer. */
  lastStatus: number | null;
  lastError: string | null;
  /** RFC 3339: when a pending delivery is tried next. */
  nextAttemptAt: string | null;
  /** RFC 3339, UTC. */
  createdAt: string;
}

/** The delivery a ping made: pending, sent at once. */
export type PingDelivery = Simplify<Omit<Delivery, 'type' | 'eventId'> & { type: typeof PING_TYPE; eventId: null }>;

/** One attempt of a delivery. */
export interface DeliveryAttempt {
  /** 1, 2, …: its number over the delivery's life. */
  attempt: number;
  /** RFC 3339: when the attempt ended. */
  at: string;
  /** The receiver's HTTP status; null when it did not answer. */
  status: number | null;
  durationMs: number;
  /** Why it failed; null when delivered. */
  error: string | null;
  /** The first 1 KiB of the receiver's answer, as text; null when it did not answer. */
  response: string | null;
}

/** One hour of a webhook's attempts, by how they ended. */
export interface WebhookActivityHour {
  /** RFC 3339, UTC: when the hour starts (a whole UTC hour). */
  start: string;
  /** Attempts the receiver answered with a 2xx status. */
  delivered: number;
  /** Every other attempt: another status, no answer, a refused address. */
  failed: number;
}

/** A webhook's attempts (its deliveries' and its pings') of the last 24 hours. */
export interface WebhookActivity {
  /** RFC 3339, UTC: when the first hour starts. */
  from: string;
  /** RFC 3339, UTC: now, by the server; the last hour is the one under way. */
  to: string;
  /** 24 hours, oldest first. */
  hours: WebhookActivityHour[];
}

export interface Recovered {
  /** How many failed deliveries are pending again. */
  requeued: number;
  /** How many deliveries were made for the events the webhook was not sent while paused or disabled (1.3.0). */
  created: number;
}

// Compile-time ties between the types above and WEBHOOK_SHAPES (which the test ties to the server):
// ids the client reads are bigints.
type Read<S extends ObjectShape> = Shaped<S, bigint>;
type _WebhookShapesMatchTypes = [
  // `destination` is an object in the shape language; its type here says which objects.
  Assert<Equal<Omit<Webhook, 'destination'>, Omit<Read<typeof WEBHOOK_SHAPES.Webhook>, 'destination'>>>,
  Assert<Webhook['destination'] extends object | null ? true : false>,
  Assert<
    Equal<Omit<WebhookWithSecret, 'destination'>, Omit<Read<typeof WEBHOOK_SHAPES.CreatedWebhook>, 'destination'>>
  >,
  Assert<
    Equal<Omit<WebhookWithSecret, 'destination'>, Omit<Read<typeof WEBHOOK_SHAPES.RotatedWebhook>, 'destination'>>
  >,
  Assert<Equal<Omit<NewWebhook, 'destination'>, Omit<Read<typeof WEBHOOK_SHAPES.NewWebhook>, 'destination'>>>,
  Assert<Equal<Omit<WebhookPatch, 'destination'>, Omit<Read<typeof WEBHOOK_SHAPES.WebhookPatch>, 'destination'>>>,
  Assert<Equal<Delivery, Read<typeof WEBHOOK_SHAPES.Delivery>>>,
  Assert<Equal<PingDelivery, Read<typeof WEBHOOK_SHAPES.PingDelivery>>>,
  Assert<Equal<DeliveryAttempt, Read<typeof WEBHOOK_SHAPES.DeliveryAttempt>>>,
  Assert<Equal<Recovered, Read<typeof WEBHOOK_SHAPES.Recovered>>>,
  Assert<Equal<{ overlapSeconds?: number }, Read<typeof WEBHOOK_SHAPES.RotateSecret>>>,
  Assert<Equal<Omit<WebhookActivity, 'hours'>, Omit<Read<typeof WEBHOOK_SHAPES.WebhookActivity>, 'hours'>>>,
  Assert<Equal<WebhookActivityHour, Read<typeof WEBHOOK_SHAPES.WebhookActivityHour>>>,
];
