import { randomBytes } from 'node:crypto';
import type { Principal } from '../auth/authenticator.js';
import type { EventSettings } from '../config.js';
import { HttpError } from '../errors.js';
import { EVENT_TYPES, type DeliveryRecord, type EventType, type Store, type WebhookRecord } from '../store/store.js';
import { checkWebhookUrl } from './address-policy.js';
import type { SecretBox } from './secret-box.js';
import { newWebhookSecret } from './signing.js';
import type { DeliveryBody, WebhookBody } from './webhook.schema.js';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** `wh_` and 16 base62 characters (95 bits): ids say nothing about order or count. */
export function newWebhookId(): string {
  let id = 'wh_';
  for (const byte of randomBytes(16)) id += ALPHABET[byte % 62];
  return id;
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

export const webhookBody = (w: WebhookRecord): WebhookBody => ({
  id: w.id,
  url: w.url,
  events: [...w.events],
  status: w.status,
  createdAt: new Date(w.createdAt).toISOString(),
});

export const deliveryBody = (d: DeliveryRecord): DeliveryBody => ({
  id: d.id,
  type: d.type,
  eventId: d.eventId,
  status: d.status,
  attempts: d.attempts,
  lastStatus: d.lastStatus,
  lastError: d.lastError,
  nextAttemptAt: iso(d.nextAttemptAt),
  createdAt: new Date(d.createdAt).toISOString(),
});

export interface NewWebhook {
  readonly owner: string;
  /** Created by a plants:admin caller (or `--all-plants`): receives every plant's events. */
  readonly allPlants: boolean;
  readonly url: string;
  readonly events?: readonly EventType[] | undefined;
}

/**
 * The rules of webhooks, for the HTTP API and the CLI alike: a webhook belongs to the subject that
 * created it, and another subject's is answered as a missing one (404), as plants are.
 */
export class WebhookService {
  constructor(
    private readonly store: Store,
    private readonly settings: EventSettings,
    private readonly box: SecretBox,
    private readonly clock: () => number = Date.now,
  ) {}

  /** The webhook, and its secret: returned this once. */
  async create(input: NewWebhook): Promise<WebhookBody & { secret: string }> {
    const checked = checkWebhookUrl(input.url, { allowPrivate: this.settings.allowPrivateTargets });
    if (!checked.ok) throw new HttpError(400, checked.reason);
    const id = newWebhookId();
    const secret = newWebhookSecret();
    const record: WebhookRecord = {
      id,
      owner: input.owner,
      allPlants: input.allPlants,
      url: checked.url.href,
      events: EVENT_TYPES.filter((type) => (input.events ?? EVENT_TYPES).includes(type)),
      status: 'active',
      secret: this.box.seal(secret, id),
      createdAt: this.clock(),
    };
    if (!(await this.store.createWebhook(record, this.settings.maxWebhooksPerSubject))) {
      throw new HttpError(
        409,
        `a subject may have at most ${this.settings.maxWebhooksPerSubject} webhooks; delete one first`,
      );
    }
    return { ...webhookBody(record), secret };
  }

  async list(owner: string | null): Promise<WebhookBody[]> {
    return (await this.store.listWebhooks(owner)).map(webhookBody);
  }

  async remove(owner: string | null, id: string): Promise<void> {
    if (!(await this.store.deleteWebhook(id, owner))) throw notFound(id);
  }

  async enable(owner: string | null, id: string): Promise<WebhookBody> {
    if (!(await this.store.enableWebhook(id, owner))) throw notFound(id);
    const webhook = (await this.store.listWebhooks(owner)).find((w) => w.id === id);
    if (!webhook) throw notFound(id); // deleted in between
    return webhookBody(webhook);
  }

  async deliveries(owner: string | null, id: string, limit: number): Promise<DeliveryBody[]> {
    const found = await this.store.listDeliveries(id, owner, limit);
    if (found === undefined) throw notFound(id);
    return found.map(deliveryBody);
  }

  async retry(owner: string | null, id: string, deliveryId: bigint): Promise<void> {
    if (!(await this.store.retryDelivery(id, deliveryId, owner))) {
      throw new HttpError(404, `no delivery ${deliveryId} of webhook ${id}`);
    }
  }
}

const notFound = (id: string): HttpError => new HttpError(404, `no webhook ${id}`);

/** Over HTTP a caller manages its own webhooks only; plants:admin changes which events they get. */
export const webhookOwner = (principal: Principal): string => principal.subject;
