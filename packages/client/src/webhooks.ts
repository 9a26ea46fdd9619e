import { OPERATIONS } from './contract.js';
import type { Int64 } from './int64.js';
import type {
  Delivery,
  DeliveryAttempt,
  NewWebhook,
  PingDelivery,
  Recovered,
  Webhook,
  WebhookActivity,
  WebhookPatch,
  WebhookWithSecret,
} from './webhook-contract.js';
import {
  deliveriesQuery,
  nextBefore,
  readActivity,
  readAttempts,
  readDeliveries,
  readPing,
  readRecovered,
  readWebhook,
  readWebhooks,
  readWithSecret,
  recoverJson,
  rotateJson,
  webhookJson,
  webhookPath,
} from './webhook-wire.js';
import { type CallOptions, type Transport, toError } from './wire.js';

export interface RotateOptions extends CallOptions {
  /** How long the old secret keeps signing beside the new one: 0 to 604 800 s (the server's default: 86 400). */
  overlapSeconds?: number;
}

export interface RecoverOptions extends CallOptions {
  /** Every failed delivery created at or after this time is sent again: a Date, or RFC 3339 text. */
  since: Date | string;
}

export interface DeliveriesOptions extends CallOptions {
  /** The newest this many, 1 to 1000 (the server's default: 100). */
  limit?: number;
  /** Only the deliveries with a smaller id: the page after the one whose last id this is (int64). */
  before?: Int64;
}

export interface DeliveriesPage {
  /** Newest first, ids exact. */
  readonly deliveries: Delivery[];
  /** The `before` of the next page (the last id of this one), or undefined on the last page. */
  readonly next: bigint | undefined;
}

/**
 * The webhook calls, as `client.webhooks`: one object, so that `create`, `list` and `delete` read
 * as the plant calls do without a `Webhook` in every name. Each is retried as its operation
 * allows (README, "Retries"): `create`, `rotateSecret` and `ping` are never sent again once they
 * may have reached the server; the others are safe to repeat.
 */
export class Webhooks {
  readonly #transport: Transport;

  constructor(transport: Transport) {
    this.#transport = transport;
  }

  /** POST /webhooks: 201, the webhook and its signing secret, shown this once. */
  async create(webhook: NewWebhook, options: CallOptions = {}): Promise<WebhookWithSecret> {
    const body = webhookJson(webhook, 'a new webhook');
    const answer = await this.#call('createWebhook', OPERATIONS.createWebhook.path, body, options);
    return readWithSecret(answer);
  }

  /** GET /webhooks: every webhook of the token's subject, oldest first (at most 20: no pages). */
  async list(options: CallOptions = {}): Promise<Webhook[]> {
    return readWebhooks(await this.#call('listWebhooks', OPERATIONS.listWebhooks.path, undefined, options));
  }

  /** PATCH /webhooks/{id}: changes the fields given, at least one. */
  async update(id: string, patch: WebhookPatch, options: CallOptions = {}): Promise<Webhook> {
    const body = webhookJson(patch, 'a webhook patch');
    const path = webhookPath(OPERATIONS.updateWebhook.path, id);
    return readWebhook(await this.#call('updateWebhook', path, body, options));
  }

  /**
   * DELETE /webhooks/{id}. A 404 after an attempt whose outcome is unknown counts as deleted,
   * as `client.delete` does for a plant.
   */
  async delete(id: string, options: CallOptions = {}): Promise<void> {
    const path = webhookPath(OPERATIONS.deleteWebhook.path, id);
    const url = this.#transport.url(path);
    const answer = await this.#transport.send('deleteWebhook', url, undefined, options.signal);
    if (answer.status === OPERATIONS.deleteWebhook.success) return;
    if (answer.status === 404 && answer.afterUnknownOutcome) return;
    throw toError(answer);
  }

  /** POST /webhooks/{id}/secret: the webhook and its new secret, shown this once. */
  async rotateSecret(id: string, options: RotateOptions = {}): Promise<WebhookWithSecret> {
    const body = rotateJson(options.overlapSeconds);
    const path = webhookPath(OPERATIONS.rotateWebhookSecret.path, id);
    return readWithSecret(await this.#call('rotateWebhookSecret', path, body, options));
  }

  /** POST /webhooks/{id}/ping: the delivery of a `webhook.ping`, sent at once whatever the webhook's status. */
  async ping(id: string, options: CallOptions = {}): Promise<PingDelivery> {
    const path = webhookPath(OPERATIONS.pingWebhook.path, id);
    return readPing(await this.#call('pingWebhook', path, undefined, options));
  }

  /**
   * POST /webhooks/{id}/recover: the failed deliveries since `since` are pending again, and the
   * events since then that the webhook was not sent while paused or disabled get a delivery each
   * (`created`). After a pause: `enable` first, then `recover`.
   */
  async recover(id: string, options: RecoverOptions): Promise<Recovered> {
    const body = recoverJson(options?.since);
    const path = webhookPath(OPERATIONS.recoverDeliveries.path, id);
    return readRecovered(await this.#call('recoverDeliveries', path, body, options));
  }

  /** POST /webhooks/{id}/enable: a disabled webhook is active again. */
  async enable(id: string, options: CallOptions = {}): Promise<Webhook> {
    const path = webhookPath(OPERATIONS.enableWebhook.path, id);
    return readWebhook(await this.#call('enableWebhook', path, undefined, options));
  }

  /** GET /webhooks/{id}/deliveries: the newest deliveries first (below `before` when given), ids exact. */
  async deliveries(id: string, options: DeliveriesOptions = {}): Promise<Delivery[]> {
    return (await this.deliveriesPage(id, options)).deliveries;
  }

  /**
   * GET /webhooks/{id}/deliveries: one page, and where the next one starts (`Link: rel="next"`).
   * Pass `next` as `before` for the page after, until it is undefined.
   */
  async deliveriesPage(id: string, options: DeliveriesOptions = {}): Promise<DeliveriesPage> {
    const query = deliveriesQuery(options.limit, options.before);
    const path = webhookPath(OPERATIONS.listDeliveries.path, id);
    const answer = await this.#call('listDeliveries', path, undefined, options, query);
    return { deliveries: readDeliveries(answer), next: nextBefore(answer) };
  }

  /** GET /webhooks/{id}/activity: its attempts of the last 24 hours, by the hour, oldest first. */
  async activity(id: string, options: CallOptions = {}): Promise<WebhookActivity> {
    const path = webhookPath(OPERATIONS.getWebhookActivity.path, id);
    return readActivity(await this.#call('getWebhookActivity', path, undefined, options));
  }

  /** POST /webhooks/{id}/deliveries/{deliveryId}/retry: sent again at once, with the same `webhook-id`. */
  async retryDelivery(id: string, deliveryId: Int64, options: CallOptions = {}): Promise<void> {
    const path = webhookPath(OPERATIONS.retryDelivery.path, id, deliveryId);
    await this.#call('retryDelivery', path, undefined, options);
  }

  /** GET /webhooks/{id}/deliveries/{deliveryId}/attempts: newest first. */
  async attempts(id: string, deliveryId: Int64, options: CallOptions = {}): Promise<DeliveryAttempt[]> {
    const path = webhookPath(OPERATIONS.listDeliveryAttempts.path, id, deliveryId);
    return readAttempts(await this.#call('listDeliveryAttempts', path, undefined, options));
  }

  /** Sends the call; answers its success answer, or throws the PlantStoreError of its failure. */
  async #call(
    operation: keyof typeof OPERATIONS,
    path: string,
    body: string | undefined,
    options: CallOptions,
    query?: URLSearchParams,
  ) {
    const answer = await this.#transport.send(operation, this.#transport.url(path, query), body, options.signal);
    if (answer.status !== OPERATIONS[operation].success) throw toError(answer);
    return answer;
  }
}
