import Type, { type Static } from '#typebox';
import type { EventType } from '../store/event-store.js';
import type { DisabledReason } from '../store/webhook-store.js';
import { OVERLAP_MAX_SECONDS } from './secret-overlap.js';
import { TEXT_RULE, textPattern } from '../wire/schemas.js';

// The shapes of docs/api.md#webhooks (interface 1.1.0, and 1.2.0's management calls): Webhook, the
// created webhook with its secret once, and the bodies that change a webhook. Deliveries:
// delivery.schema.ts.

// The OpenAPI document's examples tell one story (wire/schemas.ts's EXAMPLE_PLANT): POST /webhooks
// answers this webhook, and the operations on /webhooks/{id} name it.
export const EXAMPLE_WEBHOOK = {
  id: 'wh_5Hc2vKQ9XyPz3mTb',
  url: 'https://example.com/hooks/plants',
  destination: null,
  events: ['plant.created', 'plant.deleted'],
  status: 'active',
  createdAt: '2025-03-01T09:30:00.000Z',
  description: 'Greenhouse inventory sync',
  failingSince: null,
  disabledReason: null,
  previousSecretExpiresAt: null,
} as const;
const EXAMPLE_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
/** The secret POST /webhooks/{id}/secret answers: the one after EXAMPLE_SECRET. */
const EXAMPLE_ROTATED_SECRET = 'whsec_Zb3q1xJf0oYtE8m2RkVw7uHcLp4sNa6D';
export const DESCRIPTION_MAX = 200;

export const EventTypeSchema = Type.Union(
  [
    Type.Literal('plant.created' satisfies EventType, { description: 'plant.created or plant.deleted' }),
    Type.Literal('plant.deleted' satisfies EventType, { description: 'plant.created or plant.deleted' }),
  ],
  { description: 'plant.created (the payload is the NewPlant) or plant.deleted (`{"id": <int64>}`)' },
);

export const Timestamp = Type.String({
  format: 'date-time',
  description: 'RFC 3339, UTC',
  examples: [EXAMPLE_WEBHOOK.createdAt],
});

const Description = Type.String({
  maxLength: DESCRIPTION_MAX,
  pattern: textPattern(DESCRIPTION_MAX, 0),
  description: `what the webhook is for, for its owner: 0 to ${DESCRIPTION_MAX} ${TEXT_RULE}`,
  examples: [EXAMPLE_WEBHOOK.description],
});

const WebhookUrl = Type.String({
  minLength: 1,
  maxLength: 2048,
  description:
    'an absolute https:// URL of a public host (WEBHOOK_ALLOW_PRIVATE=1 also allows http:// and private hosts)',
  examples: [EXAMPLE_WEBHOOK.url],
});

const BrokerName = Type.String({
  minLength: 1,
  maxLength: 64,
  description: 'a broker the operator named in BROKERS',
  examples: ['events'],
});

export const DestinationSchema = Type.Union(
  [
    Type.Object(
      {
        broker: BrokerName,
        subject: Type.String({
          minLength: 1,
          maxLength: 255,
          description: "a NATS subject: the broker's allowed prefix, or that prefix, `.` and more; no wildcard",
          examples: ['plants.events'],
        }),
      },
      { additionalProperties: false, title: 'NatsDestination', description: 'a JetStream subject on a NATS broker' },
    ),
    Type.Object(
      {
        broker: BrokerName,
        routingKey: Type.String({
          maxLength: 255,
          description: "the routing key; the message goes to the broker's allowed exchange",
          examples: ['plants'],
        }),
      },
      {
        additionalProperties: false,
        title: 'RabbitDestination',
        description: "a routing key on a RabbitMQ broker's allowed exchange",
      },
    ),
  ],
  {
    description:
      'Where deliveries are published instead of POSTed: a NATS JetStream subject or a RabbitMQ routing key, on a broker BROKERS names',
  },
);

const eventTypes = (description: string) =>
  Type.Array(EventTypeSchema, { minItems: 1, uniqueItems: true, description, examples: [EXAMPLE_WEBHOOK.events] });

export const WebhookSchema = Type.Object(
  {
    id: Type.String({ description: 'the webhook id', examples: [EXAMPLE_WEBHOOK.id] }),
    url: Type.Union([Type.String(), Type.Null()], {
      description: 'where deliveries are POSTed; null for a destination',
      examples: [EXAMPLE_WEBHOOK.url],
    }),
    destination: Type.Union([DestinationSchema, Type.Null()], {
      description: 'where deliveries are published (interface 1.4.0); null for a URL',
    }),
    events: Type.Array(EventTypeSchema, {
      description: 'the event types delivered',
      examples: [EXAMPLE_WEBHOOK.events],
    }),
    status: Type.Union([Type.Literal('active'), Type.Literal('disabled')], {
      description:
        'disabled after a 410 answer, after every attempt failed for 5 days, or by its owner (PATCH); see POST …/enable',
    }),
    createdAt: Timestamp,
    description: Description,
    failingSince: Type.Union([Timestamp, Type.Null()], {
      description: 'the first failed attempt since the last delivered one; null while deliveries succeed',
    }),
    disabledReason: Type.Union(
      [
        Type.Literal('gone' satisfies DisabledReason),
        Type.Literal('failing' satisfies DisabledReason),
        Type.Literal('manual' satisfies DisabledReason),
        Type.Null(),
      ],
      {
        description:
          'null while active; `gone` after a 410 answer, `failing` after 5 days of failed attempts, `manual` when its owner disabled it',
      },
    ),
    previousSecretExpiresAt: Type.Union([Timestamp, Type.Null()], {
      description:
        "during a rotation's overlap, when the old secret stops signing (POST …/secret, overlapSeconds); null otherwise",
    }),
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
    url: Type.Optional(WebhookUrl),
    destination: Type.Optional(DestinationSchema),
    events: Type.Optional(eventTypes('default: every event type')),
    description: Type.Optional(Description),
  },
  {
    additionalProperties: false,
    description: 'A webhook to create: a `url` or a `destination`, one of the two.',
    examples: [{ url: EXAMPLE_WEBHOOK.url, events: EXAMPLE_WEBHOOK.events, description: EXAMPLE_WEBHOOK.description }],
  },
);
export type NewWebhookBody = Static<typeof NewWebhookSchema>;

export const WebhookPatchSchema = Type.Object(
  {
    url: Type.Optional(WebhookUrl),
    destination: Type.Optional(DestinationSchema),
    events: Type.Optional(eventTypes('the event types delivered from now on')),
    description: Type.Optional(Description),
    status: Type.Optional(
      Type.Union([Type.Literal('active'), Type.Literal('disabled')], {
        description:
          '`disabled` pauses deliveries (disabledReason `manual`); `active` resumes them as POST …/enable does',
      }),
    ),
  },
  {
    additionalProperties: false,
    minProperties: 1,
    description:
      "The fields to change, at least one; the others stay. A new url (or a destination's new subject or routing key) applies to every delivery not yet delivered.",
    examples: [{ description: 'Greenhouse inventory sync (paused for maintenance)', status: 'disabled' }],
  },
);
export type WebhookPatchBody = Static<typeof WebhookPatchSchema>;

export const RotateSecretSchema = Type.Object(
  {
    overlapSeconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: OVERLAP_MAX_SECONDS,
        default: 86_400,
        description:
          'how long the old secret keeps signing beside the new one (0 to 604800 seconds, default 86400: one day); 0 ends it at once',
        examples: [86_400],
      }),
    ),
  },
  {
    additionalProperties: false,
    description: 'A secret rotation; an empty object (or no body) takes the default overlap.',
    examples: [{ overlapSeconds: 86_400 }],
  },
);

export const RotatedWebhookSchema = Type.Object(
  {
    ...WebhookSchema.properties,
    secret: Type.String({
      description: 'the new signing secret, `whsec_` and base64: shown this once, never again',
      examples: [EXAMPLE_ROTATED_SECRET],
    }),
  },
  {
    additionalProperties: false,
    description:
      'The webhook with its new signing secret. Until the overlap ends, every delivery carries a signature with each secret.',
    examples: [{ ...EXAMPLE_WEBHOOK, secret: EXAMPLE_ROTATED_SECRET }],
  },
);

export const WebhookId = Type.String({
  minLength: 1,
  maxLength: 64,
  description: 'the webhook id',
  examples: [EXAMPLE_WEBHOOK.id],
});
export const WebhookIdParams = Type.Object({ id: WebhookId });
