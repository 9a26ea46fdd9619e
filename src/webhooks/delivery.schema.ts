import Type, { type Static } from '#typebox';
import { PING_TYPE } from '../store/webhook-store.js';
import { int64 } from '../wire/schemas.js';
import { EXAMPLE_WEBHOOK, EventTypeSchema, Timestamp, WebhookId } from './webhook.schema.js';

// The shapes of a webhook's deliveries (docs/api.md#webhooks): a delivery (interface 1.1.0), its
// attempts and a recover (interface 1.2.0). The examples go on EXAMPLE_WEBHOOK's story.

const EXAMPLE_DELIVERY_ID = 7;

const DeliveryTypeSchema = Type.Union([EventTypeSchema, Type.Literal(PING_TYPE, { description: 'a ping' })], {
  description: 'the event type, or `webhook.ping` for a ping (POST /webhooks/{id}/ping)',
});

export const DeliverySchema = Type.Object(
  {
    id: int64([EXAMPLE_DELIVERY_ID]),
    type: DeliveryTypeSchema,
    // `nullable`, not a union with null: the serializer writes a bigint only for a plain integer
    // type (openapi.ts turns it into OpenAPI 3.1's type list).
    eventId: Type.Unsafe<bigint | null>({
      type: 'integer',
      format: 'int64',
      nullable: true,
      description: 'the event sent; null for a ping',
      examples: [1],
    }),
    status: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]),
    attempts: Type.Integer({ minimum: 0, description: 'attempts made so far' }),
    lastStatus: Type.Union([Type.Integer(), Type.Null()], { description: "the receiver's last HTTP status" }),
    lastError: Type.Union([Type.String(), Type.Null()], { description: 'why the last attempt failed' }),
    nextAttemptAt: Type.Union([Timestamp, Type.Null()], { description: 'when a pending delivery is tried next' }),
    createdAt: Timestamp,
  },
  {
    additionalProperties: false,
    description: 'One event (or ping) sent, or to be sent, to one webhook.',
    examples: [
      {
        id: EXAMPLE_DELIVERY_ID,
        type: 'plant.created',
        eventId: 1,
        status: 'delivered',
        attempts: 1,
        lastStatus: 204,
        lastError: null,
        nextAttemptAt: null,
        createdAt: EXAMPLE_WEBHOOK.createdAt,
      },
    ],
  },
);
export type DeliveryBody = Static<typeof DeliverySchema>;

/** The ping just made: pending, due now. */
export const PING_EXAMPLE = {
  id: 8,
  type: PING_TYPE,
  eventId: null,
  status: 'pending',
  attempts: 0,
  lastStatus: null,
  lastError: null,
  nextAttemptAt: '2025-03-01T09:35:00.000Z',
  createdAt: '2025-03-01T09:35:00.000Z',
} as const;

export const PingDeliverySchema = Type.Object(
  {
    ...DeliverySchema.properties,
    type: Type.Literal(PING_TYPE, { description: 'a ping' }),
    eventId: Type.Null({ description: 'a ping is no event' }),
  },
  { additionalProperties: false, description: 'The ping just made: pending, sent at once.', examples: [PING_EXAMPLE] },
);
export type PingDeliveryBody = Static<typeof PingDeliverySchema>;

export const AttemptSchema = Type.Object(
  {
    attempt: Type.Integer({ minimum: 1, description: "1, 2, …: the attempt's number over the delivery's life" }),
    at: Type.String({
      format: 'date-time',
      description: 'when the attempt ended (RFC 3339, UTC)',
      examples: ['2025-03-01T09:30:05.412Z'],
    }),
    status: Type.Union([Type.Integer(), Type.Null()], {
      description: "the receiver's HTTP status; null when it did not answer",
    }),
    durationMs: Type.Integer({ minimum: 0, description: 'how long the attempt took, in milliseconds' }),
    error: Type.Union([Type.String(), Type.Null()], { description: 'why it failed; null when delivered' }),
    response: Type.Union([Type.String(), Type.Null()], {
      description: "the first 1 KiB of the receiver's answer, as text; null when it did not answer",
    }),
  },
  {
    additionalProperties: false,
    description: 'One attempt of a delivery.',
    examples: [
      {
        attempt: 2,
        at: '2025-03-01T09:30:05.412Z',
        status: 204,
        durationMs: 38,
        error: null,
        response: '',
      },
    ],
  },
);
export type AttemptBody = Static<typeof AttemptSchema>;

export const RecoverSchema = Type.Object(
  {
    since: Type.String({
      format: 'date-time',
      description: 'RFC 3339: every failed delivery created at or after this time is sent again',
      examples: ['2025-03-01T06:00:00Z'],
    }),
  },
  {
    additionalProperties: false,
    description: 'Which failed deliveries to send again.',
    examples: [{ since: '2025-03-01T06:00:00Z' }],
  },
);

export const RecoveredSchema = Type.Object(
  {
    requeued: Type.Integer({ minimum: 0, description: 'how many failed deliveries are pending again' }),
    created: Type.Integer({
      minimum: 0,
      description:
        'how many deliveries were made for events the webhook was not sent while paused or disabled (interface 1.3.0)',
    }),
  },
  {
    additionalProperties: false,
    description: 'What a recover put back in the queue, and what it made for the time the webhook was paused.',
    examples: [{ requeued: 42, created: 7 }],
  },
);

export const DeliveryParams = Type.Object({ id: WebhookId, deliveryId: int64([EXAMPLE_DELIVERY_ID]) });
/** `limit` on GET /webhooks/{id}/deliveries. */
export const DELIVERIES_LIMIT = { min: 1, max: 1000, default: 100 } as const;

export const DeliveriesQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({
      minimum: DELIVERIES_LIMIT.min,
      maximum: DELIVERIES_LIMIT.max,
      default: DELIVERIES_LIMIT.default,
      description: 'how many deliveries, newest first',
      examples: [10],
    }),
  ),
  // An int64 as every id of this API: decimal text in the query, never through a JS number.
  before: Type.Optional(
    Type.Unsafe<bigint>({
      type: 'integer',
      format: 'int64',
      description:
        'a delivery id: only the deliveries with a smaller id, newest first (the next page, as the `Link` header of the page before gives it)',
      examples: [PING_EXAMPLE.id],
    }),
  ),
});

/** RFC 8288: the next page starts below the last delivery of this one. */
export const nextDeliveriesLink = (webhookId: string, limit: number, before: bigint): string =>
  `</webhooks/${encodeURIComponent(webhookId)}/deliveries?limit=${limit}&before=${before}>; rel="next"`;

/** The `Link` header of GET /webhooks/{id}/deliveries, as the OpenAPI document describes it. */
export const DELIVERIES_LINK = {
  description:
    'RFC 8288 link to the next page, present when older deliveries follow: `</webhooks/{id}/deliveries?limit=…&before=<last id of this page>>; rel="next"`',
  schema: { type: 'string' },
  example: nextDeliveriesLink(EXAMPLE_WEBHOOK.id, 1, BigInt(EXAMPLE_DELIVERY_ID)),
};
