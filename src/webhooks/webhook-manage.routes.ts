import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Type from '#typebox';
import { jsonOrNothing, requireJson } from '../http/json-body.js';
import { errorResponses } from '../http/responses.js';
import { ActivitySchema } from './activity.schema.js';
import {
  AttemptSchema,
  DeliveryParams,
  PingDeliverySchema,
  RecoverSchema,
  RecoveredSchema,
} from './delivery.schema.js';
import {
  RotateSecretSchema,
  RotatedWebhookSchema,
  WebhookIdParams,
  WebhookPatchSchema,
  WebhookSchema,
} from './webhook.schema.js';
import type { WebhookService } from './webhook.service.js';

const security = [{ bearerAuth: [] }];
const tags = ['webhooks'];
const common = [401, 403, 408, 429, 431, 500, 503];
const withBody = [400, 404, 413, 415, ...common];

/** The /webhooks calls of interface 1.2.0 (docs/api.md#webhooks): schema → service → reply, nothing else. */
export function webhookManageRoutes(app: FastifyInstance, service: WebhookService): void {
  const api = app.withTypeProvider<TypeBoxTypeProvider>();

  api.patch(
    '/webhooks/:id',
    {
      schema: {
        operationId: 'updateWebhook',
        summary: 'Change a webhook',
        description:
          'Changes its url (checked as at creation; every delivery not yet delivered goes to the new one), its event types, its description, or its status: `disabled` pauses deliveries, `active` resumes them as POST …/enable does. An empty object or an unknown field answers 400.',
        tags,
        security,
        params: WebhookIdParams,
        body: WebhookPatchSchema,
        response: { 200: WebhookSchema, ...errorResponses(...withBody) },
      },
      config: { scope: 'webhooks:write' },
      preValidation: requireJson,
    },
    (request) => service.update(request.principal.subject, request.params.id, request.body, request.log),
  );

  api.post(
    '/webhooks/:id/secret',
    {
      schema: {
        operationId: 'rotateWebhookSecret',
        summary: 'Rotate the signing secret',
        description:
          'A new signing secret, shown this once. Until the overlap ends every delivery carries two signatures, `v1,<with the new secret> v1,<with the old>`, so a receiver holding either verifies; after it, only the new one signs. Send no body, or `{}`, for the default overlap of a day.',
        tags,
        security,
        params: WebhookIdParams,
        body: RotateSecretSchema,
        'x-body-optional': true,
        response: { 200: RotatedWebhookSchema, ...errorResponses(...withBody) },
      },
      config: { scope: 'webhooks:write' },
      preValidation: jsonOrNothing,
    },
    (request) => service.rotateSecret(request.principal.subject, request.params.id, request.body.overlapSeconds),
  );

  api.post(
    '/webhooks/:id/ping',
    {
      schema: {
        operationId: 'pingWebhook',
        summary: 'Send a test delivery',
        description:
          'Sends `{"webhookId": "<id>"}`, signed like any delivery, with `plant-store-event: webhook.ping`, whatever the webhook’s status. It is attempted once; its answer is in its attempts. A ping is never on the change feed.',
        tags,
        security,
        params: WebhookIdParams,
        response: {
          202: PingDeliverySchema,
          ...errorResponses(400, 404, ...common),
        },
      },
      config: { scope: 'webhooks:write' },
    },
    async (request, reply) => reply.code(202).send(await service.ping(request.principal.subject, request.params.id)),
  );

  api.post(
    '/webhooks/:id/recover',
    {
      schema: {
        operationId: 'recoverDeliveries',
        summary: 'Send failed deliveries again',
        description:
          'Every failed delivery of this webhook created at or after `since` is pending again, sent from the start of the retry schedule with its own `webhook-id`, and every event since then that it was not sent while paused gets a delivery. For a receiver back from an outage. Done in parts, each committed on its own, and idempotent: one that stops midway answers 503 (the database was unavailable) or 500 with what it did, and calling it again finishes the work.',
        tags,
        security,
        params: WebhookIdParams,
        body: RecoverSchema,
        response: { 202: RecoveredSchema, ...errorResponses(...withBody) },
      },
      config: { scope: 'webhooks:write' },
      preValidation: requireJson,
    },
    async (request, reply) =>
      reply
        .code(202)
        .send(
          await service.recover(request.principal.subject, request.params.id, request.body.since, { log: request.log }),
        ),
  );

  api.get(
    '/webhooks/:id/deliveries/:deliveryId/attempts',
    {
      schema: {
        operationId: 'listDeliveryAttempts',
        summary: "A delivery's attempts",
        description:
          'Newest first: when each attempt ended, the HTTP status, how long it took, why it failed, and the first 1 KiB of the answer. Kept as long as the delivery.',
        tags,
        security,
        params: DeliveryParams,
        response: { 200: Type.Array(AttemptSchema), ...errorResponses(400, 404, ...common) },
      },
      config: { scope: 'webhooks:read' },
    },
    (request) => service.attempts(request.principal.subject, request.params.id, request.params.deliveryId),
  );

  api.get(
    '/webhooks/:id/activity',
    {
      schema: {
        operationId: 'getWebhookActivity',
        summary: "A webhook's last 24 hours",
        description:
          "Its attempts (its deliveries' and its pings') in each of the last 24 hours, oldest first, whole UTC hours, the last one the hour under way: `delivered` when the receiver answered 2xx, `failed` for every other attempt (another status, no answer, a refused address). What a chart of recent deliveries shows.",
        tags,
        security,
        params: WebhookIdParams,
        response: { 200: ActivitySchema, ...errorResponses(400, 404, ...common) },
      },
      config: { scope: 'webhooks:read' },
    },
    (request) => service.activity(request.principal.subject, request.params.id),
  );
}
