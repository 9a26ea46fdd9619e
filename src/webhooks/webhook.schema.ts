import Type, { type Static } from 'typebox';
import { Int64, int64 } from '../plants/plant.schema.js';
import type { EventType } from '../store/store.js';

// The shapes of CONTRACT.md's Events section: Webhook, the created webhook with its secret once,
// and a delivery record.

// The OpenAPI document's examples tell one story (as plant.schema.ts's do): POST /webhooks answers
// this webhook, and the operations on /webhooks/{id} name it.
const EXAMPLE_WEBHOOK = {
  id: 'wh_5Hc2vKQ9XyPz3mTb',
  url: 'https://example.com/hooks/plants',
  events: ['plant.created', 'plant.deleted'],
  status: 'active',
  createdAt: '2025-03-01T09:30:00.000Z',
} as const;
const EXAMPLE_DELIVERY_ID = 7;
const EXAMPLE_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

export const EventTypeSchema = Type.Union(
  [
    Type.Literal('plant.created' satisfies EventType, { description: 'plant.created or plant.deleted' }),
    Type.Literal('plant.deleted' satisfies EventType, { description: 'plant.created or plant.deleted' }),
  ],
  { description: 'plant.created (the payload is the NewPlant) or plant.deleted (`{"id": <int64>}`)' },
);

const Timestamp = Type.String({
  format: 'date-time',
  description: 'RFC 3339, UTC',
  examples: [EXAMPLE_WEBHOOK.createdAt],
});

export const WebhookSchema = Type.Object(
  {
    id: Type.String({ description: 'the webhook id', examples: [EXAMPLE_WEBHOOK.id] }),
    url: Type.String({ description: 'where deliveries are POSTed', examples: [EXAMPLE_WEBHOOK.url] }),
    events: Type.Array(EventTypeSchema, {
      description: 'the event types delivered',
      examples: [EXAMPLE_WEBHOOK.events],
    }),
    status: Type.Union([Type.Literal('active'), Type.Literal('disabled')], {
      description: 'disabled after a 410 answer, or after every attempt failed for 5 days; see POST …/enable',
    }),
    createdAt: Timestamp,
  },
  { additionalProperties: false, description: 'A subscription to events.', examples: [EXAMPLE_WEBHOOK] },
);
export type WebhookBody = Static<typeof WebhookSchema>;

export const CreatedWebhookSchema = Type.Object(
  {
    ...WebhookSchema.properties,
    secret: Type.String({
      description: 'the signing secret, `whsec_` and base64: shown this once, never again',
      examples: [EXAMPLE_SECRET],
    }),
  },
  {
    additionalProperties: false,
    description: 'The webhook just created, with its signing secret: the only answer that shows it.',
    examples: [{ ...EXAMPLE_WEBHOOK, secret: EXAMPLE_SECRET }],
  },
);

export const NewWebhookSchema = Type.Object(
  {
    url: Type.String({
      minLength: 1,
      maxLength: 2048,
      description:
        'an absolute https:// URL of a public host (WEBHOOK_ALLOW_PRIVATE=1 also allows http:// and private hosts)',
      examples: [EXAMPLE_WEBHOOK.url],
    }),
    events: Type.Optional(
      Type.Array(EventTypeSchema, {
        minItems: 1,
        uniqueItems: true,
        description: 'default: every event type',
        examples: [EXAMPLE_WEBHOOK.events],
      }),
    ),
  },
  {
    additionalProperties: false,
    description: 'A webhook to create.',
    examples: [{ url: EXAMPLE_WEBHOOK.url, events: EXAMPLE_WEBHOOK.events }],
  },
);
export type NewWebhookBody = Static<typeof NewWebhookSchema>;

export const DeliverySchema = Type.Object(
  {
    id: int64([EXAMPLE_DELIVERY_ID]),
    type: EventTypeSchema,
    eventId: Int64,
    status: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]),
    attempts: Type.Integer({ minimum: 0, description: 'attempts made so far' }),
    lastStatus: Type.Union([Type.Integer(), Type.Null()], { description: "the receiver's last HTTP status" }),
    lastError: Type.Union([Type.String(), Type.Null()], { description: 'why the last attempt failed' }),
    nextAttemptAt: Type.Union([Timestamp, Type.Null()], { description: 'when a pending delivery is tried next' }),
    createdAt: Timestamp,
  },
  {
    additionalProperties: false,
    description: 'One event sent (or to be sent) to one webhook.',
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

const WebhookId = Type.String({
  minLength: 1,
  maxLength: 64,
  description: 'the webhook id',
  examples: [EXAMPLE_WEBHOOK.id],
});
export const WebhookIdParams = Type.Object({ id: WebhookId });
export const DeliveryParams = Type.Object({ id: WebhookId, deliveryId: int64([EXAMPLE_DELIVERY_ID]) });
export const DeliveriesQuery = Type.Object({
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: 1000,
      default: 100,
      description: 'how many deliveries, newest first',
      examples: [10],
    }),
  ),
});
