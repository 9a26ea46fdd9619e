import type { ApiPart, Json } from '../http/openapi.js';
import { EXAMPLE_PLANT } from '../wire/schemas.js';
import { ActivitySchema } from './activity.schema.js';
import { AttemptSchema, DeliverySchema } from './delivery.schema.js';
import {
  CreatedWebhookSchema,
  EXAMPLE_WEBHOOK,
  NewWebhookSchema,
  RotatedWebhookSchema,
  WebhookPatchSchema,
  WebhookSchema,
} from './webhook.schema.js';

// What the webhooks add to the OpenAPI document besides their routes: their tag, their named
// shapes, and the requests a receiver gets, signed as Standard Webhooks says (signing.ts).

const signatureHeaders: Json[] = [
  [
    'webhook-id',
    'the message id, `evt_<event id>`: the same on every retry of one event (`ping_<delivery id>` for a ping)',
    'evt_1',
  ],
  ['webhook-timestamp', 'Unix seconds when this attempt was signed', '1740821400'],
  [
    'webhook-signature',
    "`v1,` and the base64 HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>` under the secret; during a rotation's overlap two, space-separated: `v1,<with the new secret> v1,<with the old>`",
    'v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=',
  ],
  ['plant-store-event', 'the event type, or `webhook.ping`', 'plant.created'],
].map(([name, description, example]) => ({
  name,
  in: 'header',
  required: true,
  description,
  schema: { type: 'string' },
  example,
}));

const received = {
  '200': { description: 'Return a 200 status to indicate that the data was received successfully' },
};

/** What the service POSTs to a webhook (OpenAPI 3.1 `webhooks`): the original document's newPlant, and plantDeleted. */
const CALLBACKS: Json = {
  newPlant: {
    post: {
      summary: 'A plant was created (plant.created)',
      description:
        'Sent to every active webhook that receives plant.created events, signed as Standard Webhooks says. Any 2xx is success; anything else, or no answer in 10 s, is retried.',
      parameters: signatureHeaders,
      requestBody: {
        description: 'Information about a new plant in the system',
        content: { 'application/json': { schema: { $ref: '#/components/schemas/NewPlant' } } },
      },
      responses: received,
    },
  },
  plantDeleted: {
    post: {
      summary: 'A plant was deleted (plant.deleted)',
      description: 'Sent as newPlant is, for plant.deleted events.',
      parameters: signatureHeaders,
      requestBody: {
        description: 'The id of the deleted plant',
        content: {
          'application/json': {
            schema: {
              type: 'object',
              properties: { id: { type: 'integer', format: 'int64' } },
              required: ['id'],
              additionalProperties: false,
              examples: [{ id: EXAMPLE_PLANT.id }],
            },
          },
        },
      },
      responses: received,
    },
  },
  webhookPing: {
    post: {
      summary: 'A test delivery (webhook.ping)',
      description:
        'Sent once when the webhook’s owner asks for it (POST /webhooks/{id}/ping), whatever the webhook’s status, signed as newPlant is, with `plant-store-event: webhook.ping`. Never on the change feed.',
      parameters: signatureHeaders,
      requestBody: {
        description: 'The id of the webhook pinged',
        content: {
          'application/json': {
            schema: {
              type: 'object',
              properties: { webhookId: { type: 'string' } },
              required: ['webhookId'],
              additionalProperties: false,
              examples: [{ webhookId: EXAMPLE_WEBHOOK.id }],
            },
          },
        },
      },
      responses: received,
    },
  },
};

export const WEBHOOKS_API: ApiPart = {
  tags: [
    { name: 'webhooks', description: 'Subscriptions that POST each plant.created and plant.deleted event to a URL.' },
  ],
  schemas: [
    ['Webhook', WebhookSchema],
    ['NewWebhook', NewWebhookSchema],
    ['CreatedWebhook', CreatedWebhookSchema],
    ['Delivery', DeliverySchema],
    ['WebhookPatch', WebhookPatchSchema],
    ['RotatedWebhook', RotatedWebhookSchema],
    ['DeliveryAttempt', AttemptSchema],
    ['WebhookActivity', ActivitySchema],
  ],
  webhooks: CALLBACKS,
};
