import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import Type from '#typebox';
import { requireJson } from '../http/json-body.js';
import { errorResponses } from '../http/responses.js';
import {
  DELIVERIES_LIMIT,
  DELIVERIES_LINK,
  DeliveriesQuery,
  DeliveryParams,
  DeliverySchema,
  nextDeliveriesLink,
} from './delivery.schema.js';
import { webhookManageRoutes } from './webhook-manage.routes.js';
import { CreatedWebhookSchema, NewWebhookSchema, WebhookIdParams, WebhookSchema } from './webhook.schema.js';
import type { WebhookService } from './webhook.service.js';

const security = [{ bearerAuth: [] }];
const tags = ['webhooks'];
const common = [401, 403, 408, 429, 431, 500, 503];

/** The /webhooks API (docs/api.md#webhooks): schema → service → reply, nothing else. */
export function webhookRoutes(service: WebhookService): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      '/webhooks',
      {
        schema: {
          operationId: 'createWebhook',
          summary: 'Subscribe to events',
          description:
            'Registers a URL to receive plant.created and plant.deleted events (or those listed), signed as Standard Webhooks says, or a destination on a broker the operator named (a NATS JetStream subject, a RabbitMQ routing key) to publish them to. The answer carries the signing secret: it is shown this once.',
          tags,
          security,
          body: NewWebhookSchema,
          response: { 201: CreatedWebhookSchema, ...errorResponses(400, 409, 413, 415, ...common) },
        },
        config: { scope: 'webhooks:write' },
        preValidation: requireJson,
      },
      async (request, reply) => {
        const { principal } = request;
        const created = await service.create({
          owner: principal.subject,
          allPlants: principal.scopes.has('plants:admin'),
          url: request.body.url,
          destination: request.body.destination,
          events: request.body.events,
          description: request.body.description,
        });
        return reply.code(201).send(created);
      },
    );

    app.get(
      '/webhooks',
      {
        schema: {
          operationId: 'listWebhooks',
          summary: "List the caller's webhooks",
          description: 'Every webhook the caller created, oldest first. Secrets are never shown again.',
          tags,
          security,
          response: { 200: Type.Array(WebhookSchema), ...errorResponses(...common) },
        },
        config: { scope: 'webhooks:read' },
      },
      (request) => service.list(request.principal.subject),
    );

    app.delete(
      '/webhooks/:id',
      {
        schema: {
          operationId: 'deleteWebhook',
          summary: 'Delete a webhook',
          description:
            'Stops its deliveries and forgets them. Another subject’s webhook answers 404, as a missing one does.',
          tags,
          security,
          params: WebhookIdParams,
          response: { 204: Type.Null({ description: 'deleted' }), ...errorResponses(400, 404, ...common) },
        },
        config: { scope: 'webhooks:write' },
      },
      async (request, reply) => {
        await service.remove(request.principal.subject, request.params.id);
        return reply.code(204).send(null);
      },
    );

    app.get(
      '/webhooks/:id/deliveries',
      {
        schema: {
          operationId: 'listDeliveries',
          summary: "A webhook's deliveries",
          description:
            'Newest first: each event sent (or to be sent) to this webhook, with its attempts. When older deliveries follow, a `Link: <…>; rel="next"` header points at the next page (`?before=` the last id of this one).',
          tags,
          security,
          params: WebhookIdParams,
          querystring: DeliveriesQuery,
          'x-response-headers': { Link: DELIVERIES_LINK },
          response: { 200: Type.Array(DeliverySchema), ...errorResponses(400, 404, ...common) },
        },
        config: { scope: 'webhooks:read' },
      },
      async (request, reply) => {
        const { id } = request.params;
        const { limit = DELIVERIES_LIMIT.default, before } = request.query;
        const page = await service.deliveryPage(request.principal.subject, id, limit, before);
        if (page.next !== undefined) void reply.header('link', nextDeliveriesLink(id, limit, page.next));
        return page.deliveries;
      },
    );

    app.post(
      '/webhooks/:id/deliveries/:deliveryId/retry',
      {
        schema: {
          operationId: 'retryDelivery',
          summary: 'Send a delivery again',
          description: 'The delivery is pending again and sent at once, with the same `webhook-id`.',
          tags,
          security,
          params: DeliveryParams,
          response: {
            202: Type.Null({ description: 'it will be sent again' }),
            ...errorResponses(400, 404, ...common),
          },
        },
        config: { scope: 'webhooks:write' },
      },
      async (request, reply) => {
        await service.retry(request.principal.subject, request.params.id, request.params.deliveryId);
        return reply.code(202).send(null);
      },
    );

    app.post(
      '/webhooks/:id/enable',
      {
        schema: {
          operationId: 'enableWebhook',
          summary: 'Enable a disabled webhook',
          description: 'A disabled webhook is active again; its pending deliveries are sent.',
          tags,
          security,
          params: WebhookIdParams,
          response: { 200: WebhookSchema, ...errorResponses(400, 404, ...common) },
        },
        config: { scope: 'webhooks:write' },
      },
      (request) => service.enable(request.principal.subject, request.params.id),
    );

    webhookManageRoutes(app, service);
  };
}
