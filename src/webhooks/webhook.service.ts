import { randomBytes } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import type { Principal } from '../auth/principal.js';
import type { EventSettings } from '../config.js';
import { HttpError } from '../errors.js';
import { UNAVAILABLE_RETRY_AFTER } from '../http/error-handler.js';
import { RFC3339_DATE_TIME } from '../http/validation.js';
import { type Store, StoreUnavailableError } from '../store/store.js';
import { EVENT_TYPES, type EventType } from '../store/event-store.js';
import {
  type AttemptRecord,
  type DeliveryRecord,
  PING_TYPE,
  type NewWebhookRecord,
  type Recovered,
  RecoverStoppedError,
  type WebhookPatch,
  type WebhookRecord,
} from '../store/webhook-store.js';
import { type ActivityBody, activityBody, activitySpan } from './activity.schema.js';
import { allowPrivateHint, checkWebhookUrl } from './address-policy.js';
import type { AttemptBody, DeliveryBody, PingDeliveryBody } from './delivery.schema.js';
import { logDisabled } from './disabled-log.js';
import type { SecretBox } from './secret-box.js';
import { newWebhookSecret } from './signing.js';
import { DESCRIPTION_MAX, type WebhookBody, type WebhookPatchBody } from './webhook.schema.js';
import { textPattern } from '../wire/schemas.js';
import { subjectAllowed } from '../wire/broker-settings.js';
import { type Destination, destinationOf, destinationTarget } from '../brokers/destination.js';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** `wh_` and 16 base62 characters (95 bits): ids say nothing about order or count. */
export function newWebhookId(): string {
  let id = 'wh_';
  for (const byte of randomBytes(16)) id += ALPHABET[byte % 62];
  return id;
}

/**
 * A webhook URL refused by a rule WEBHOOK_ALLOW_PRIVATE=1 lifts (http://, a private host): the 400
 * names the setting; `plant-store webhooks` says it for its own process from `rule`.
 */
export class PrivateTargetError extends HttpError {
  constructor(readonly rule: string) {
    super(400, `${rule} (${allowPrivateHint('a server started with WEBHOOK_ALLOW_PRIVATE=1')})`);
  }
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** The API's Webhook; `now` decides whether a rotation's overlap still runs (previousSecretExpiresAt). */
export const webhookBody = (w: WebhookRecord, now: number): WebhookBody => {
  const destination = destinationOf(w.url);
  return {
    id: w.id,
    url: destination === null ? w.url : null,
    destination,
    events: [...w.events],
    status: w.status,
    createdAt: new Date(w.createdAt).toISOString(),
    description: w.description,
    failingSince: iso(w.failingSince),
    disabledReason: w.status === 'active' ? null : w.disabledReason,
    previousSecretExpiresAt:
      w.previousSecret !== null && w.previousSecretUntil !== null && w.previousSecretUntil > now
        ? iso(w.previousSecretUntil)
        : null,
  };
};

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

const attemptBody = (a: AttemptRecord): AttemptBody => ({
  attempt: a.attempt,
  at: new Date(a.at).toISOString(),
  status: a.status,
  durationMs: a.durationMs,
  error: a.error,
  response: a.response,
});

function parseTime(text: string, what: string): number {
  const ms = RFC3339_DATE_TIME.test(text) ? rfc3339Ms(text) : undefined;
  if (ms === undefined) throw new HttpError(400, `${what} must be an RFC 3339 time such as 2025-03-01T06:00:00Z`);
  return ms;
}

/**
 * An RFC 3339 date-time (its form already checked) as milliseconds since the epoch, or undefined
 * for a date or time that does not exist. `Date.parse` is lenient: it read 2025-02-30 as 2 March,
 * and refused the leap second 23:59:60, which RFC 3339 §5.7 allows (read as the next second's
 * start: JavaScript's time counts no leap seconds).
 */
export function rfc3339Ms(text: string): number | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|([+-])(\d{2}):(\d{2}))$/i.exec(text);
  if (m === null) return undefined;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth || hour > 23 || minute > 59 || second > 60)
    return undefined;
  const offsetHours = m[9] === undefined ? 0 : Number(m[10]);
  const offsetMinutes = m[9] === undefined ? 0 : Number(m[11]);
  if (offsetHours > 23 || offsetMinutes > 59) return undefined;
  const fraction = m[7] === undefined ? 0 : Math.floor(Number(m[7]) * 1000);
  const sign = m[9] === '-' ? -1 : 1;
  const utc = Date.UTC(year, month - 1, day, hour, minute, Math.min(second, 59)) + (second === 60 ? 1000 : fraction);
  return utc - sign * (offsetHours * 60 + offsetMinutes) * 60_000;
}

/** The rule the HTTP schema applies (webhook.schema.ts), for the CLI's descriptions too. */
const DESCRIPTION_RULE = new RegExp(textPattern(DESCRIPTION_MAX, 0), 'u');

function checkDescription(text: string | undefined): string | undefined {
  if (text !== undefined && !DESCRIPTION_RULE.test(text)) {
    throw new HttpError(400, `a description is at most ${DESCRIPTION_MAX} characters, without control characters`);
  }
  return text;
}

/** The default overlap of two secrets after a rotation: one day (interface 1.2.0; docs/api.md#webhooks). */
export const DEFAULT_OVERLAP_SECONDS = 86_400;

export interface DeliveryPage {
  readonly deliveries: DeliveryBody[];
  /** Where the next page starts (its `before`); undefined on the last page. */
  readonly next: bigint | undefined;
}

export interface NewWebhook {
  readonly owner: string;
  /** Created by a plants:admin caller (or `--all-plants`): receives every plant's events. */
  readonly allPlants: boolean;
  /** A URL, or a destination on a broker BROKERS names: one of the two. */
  readonly url?: string | undefined;
  readonly destination?: Destination | undefined;
  readonly events?: readonly EventType[] | undefined;
  readonly description?: string | undefined;
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
    const id = newWebhookId();
    const secret = newWebhookSecret();
    const record: NewWebhookRecord = {
      id,
      owner: input.owner,
      allPlants: input.allPlants,
      url: this.checkTarget(input.url, input.destination),
      events: inOrder(input.events ?? EVENT_TYPES),
      status: 'active',
      secret: this.box.seal(secret, id),
      createdAt: this.clock(),
      description: checkDescription(input.description) ?? '',
    };
    if (!(await this.store.createWebhook(record, this.settings.maxWebhooksPerSubject))) {
      throw new HttpError(
        409,
        `a subject may have at most ${this.settings.maxWebhooksPerSubject} webhooks; delete one first`,
      );
    }
    const stored: WebhookRecord = {
      ...record,
      description: record.description ?? '',
      failingSince: null,
      disabledReason: null,
      previousSecret: null,
      previousSecretUntil: null,
    };
    return { ...webhookBody(stored, this.clock()), secret };
  }

  /** The stored target of a URL or a destination: exactly one is given. */
  private checkTarget(url: string | undefined, destination: Destination | undefined): string {
    if ((url === undefined) === (destination === undefined)) {
      throw new HttpError(400, 'give either url (an https:// receiver) or destination (a broker), not both');
    }
    return url !== undefined ? this.checkUrl(url) : destinationTarget(this.checkDestination(destination!));
  }

  /** A destination on a broker BROKERS names, within what that broker allows (docs/api.md#destinations). */
  private checkDestination(destination: Destination): Destination {
    const broker = this.settings.brokers.find((b) => b.name === destination.broker);
    if (broker === undefined) {
      const named = this.settings.brokers.map((b) => `"${b.name}"`).join(', ');
      throw new HttpError(
        400,
        `body.destination.broker: no broker "${destination.broker}" is named by this service (${named === '' ? 'BROKERS names none' : `BROKERS names ${named}`})`,
      );
    }
    if (broker.kind === 'nats') {
      if (!('subject' in destination)) {
        throw new HttpError(
          400,
          `body.destination: "${broker.name}" is a NATS broker: give a subject, not a routingKey`,
        );
      }
      if (!subjectAllowed(destination.subject, broker.allow)) {
        throw new HttpError(
          400,
          `body.destination.subject must be "${broker.allow}" or start with "${broker.allow}." (no * or >, no spaces); got "${destination.subject}"`,
        );
      }
      return { broker: broker.name, subject: destination.subject };
    }
    if (!('routingKey' in destination)) {
      throw new HttpError(
        400,
        `body.destination: "${broker.name}" is a RabbitMQ broker: give a routingKey, not a subject`,
      );
    }
    if (Buffer.byteLength(destination.routingKey) > 255) {
      throw new HttpError(400, 'body.destination.routingKey must be at most 255 bytes');
    }
    return { broker: broker.name, routingKey: destination.routingKey };
  }

  private checkUrl(url: string): string {
    const checked = checkWebhookUrl(url, { allowPrivate: this.settings.allowPrivateTargets });
    if (!checked.ok)
      throw checked.privateOnly ? new PrivateTargetError(checked.reason) : new HttpError(400, checked.reason);
    return checked.url.href;
  }

  /**
   * PATCH /webhooks/{id}: changes what `patch` gives. `log`: where a webhook disabled by this
   * change is told (one warn line, docs/api.md#delivery).
   */
  async update(
    owner: string | null,
    id: string,
    patch: WebhookPatchBody,
    log?: Pick<FastifyBaseLogger, 'warn'>,
  ): Promise<WebhookBody> {
    if (Object.keys(patch).length === 0)
      throw new HttpError(400, 'give at least one of url, destination, events, description, status');
    if (patch.url !== undefined && patch.destination !== undefined) {
      throw new HttpError(400, 'give either url or destination, not both');
    }
    if (patch.url !== undefined || patch.destination !== undefined) {
      // A webhook keeps its kind: a URL's moves to another URL, a destination's to another subject or key.
      const current = (await this.store.listWebhooks(owner)).find((w) => w.id === id);
      if (current === undefined) throw notFound(id);
      const isDestination = destinationOf(current.url) !== null;
      if (isDestination !== (patch.destination !== undefined)) {
        throw new HttpError(
          400,
          isDestination
            ? 'this webhook publishes to a destination: change its destination, not a url'
            : 'this webhook POSTs to a url: change its url, not a destination',
        );
      }
    }
    const change: WebhookPatch = {
      ...(patch.url !== undefined && { url: this.checkUrl(patch.url) }),
      ...(patch.destination !== undefined && { url: destinationTarget(this.checkDestination(patch.destination)) }),
      ...(patch.events !== undefined && { events: inOrder(patch.events) }),
      ...(patch.description !== undefined && { description: checkDescription(patch.description) }),
      ...(patch.status !== undefined && { status: patch.status }),
    };
    const updated = await this.store.updateWebhook(id, owner, change);
    if (updated === undefined) throw notFound(id);
    if (updated.disabled && log !== undefined) logDisabled(log, updated.webhook, 'manual');
    return webhookBody(updated.webhook, this.clock());
  }

  /** A new secret, shown this once; the old one signs beside it for `overlapSeconds`. */
  async rotateSecret(
    owner: string | null,
    id: string,
    overlapSeconds = DEFAULT_OVERLAP_SECONDS,
  ): Promise<WebhookBody & { secret: string }> {
    const secret = newWebhookSecret();
    // The end of the overlap by this service's clock, which the dispatchers compare with theirs.
    const until = overlapSeconds > 0 ? this.clock() + overlapSeconds * 1000 : null;
    const rotated = await this.store.rotateSecret(id, owner, this.box.seal(secret, id), until);
    if (rotated === undefined) throw notFound(id);
    return { ...webhookBody(rotated, this.clock()), secret };
  }

  async ping(owner: string | null, id: string): Promise<PingDeliveryBody> {
    const made = await this.store.pingWebhook(id, owner);
    if (made === undefined) throw notFound(id);
    return { ...deliveryBody(made), type: PING_TYPE, eventId: null };
  }

  /**
   * POST /webhooks/{id}/recover and `webhooks recover`: done by the store in parts. A recover that
   * takes RECOVER_PROGRESS_EVERY_MS or more is logged as it goes (at most one line that often) and
   * at its end, and `watch.progress` is told the same. One that stops after some of its parts
   * committed answers what they did and that calling it again finishes the work: 503 when the
   * database was unavailable, 500 otherwise; the cause goes to the log only (a database's message
   * may name its servers).
   */
  async recover(owner: string | null, id: string, since: string, watch: RecoverWatch = {}): Promise<Recovered> {
    const from = parseTime(since, 'since');
    const started = this.clock();
    let told = started;
    const onProgress = (done: Recovered): void => {
      const now = this.clock();
      if (now - told < RECOVER_PROGRESS_EVERY_MS) return;
      told = now;
      watch.log?.info({ webhookId: id, ...done, elapsedMs: now - started }, 'recover under way');
      watch.progress?.(done, now - started);
    };
    let recovered: Recovered | undefined;
    try {
      recovered = await this.store.recoverDeliveries(id, owner, from, { onProgress });
    } catch (error) {
      throw error instanceof RecoverStoppedError ? recoverStopped(error, id, this.clock() - started, watch.log) : error;
    }
    if (recovered === undefined) throw notFound(id);
    const { requeued, created } = recovered;
    const durationMs = this.clock() - started;
    if (durationMs >= RECOVER_PROGRESS_EVERY_MS)
      watch.log?.info({ webhookId: id, requeued, created, durationMs }, 'recover done');
    return { requeued, created };
  }

  async attempts(owner: string | null, id: string, deliveryId: bigint): Promise<AttemptBody[]> {
    const found = await this.store.listAttempts(id, deliveryId, owner);
    if (found === undefined) throw new HttpError(404, `no delivery ${deliveryId} of webhook ${id}`);
    return found.map(attemptBody);
  }

  async list(owner: string | null): Promise<WebhookBody[]> {
    const now = this.clock();
    return (await this.store.listWebhooks(owner)).map((w) => webhookBody(w, now));
  }

  /** Every webhook (or `owner`'s), each with the subject it belongs to: `plant-store webhooks list`. */
  async listWithSubjects(owner: string | null): Promise<Array<WebhookBody & { subject: string }>> {
    const now = this.clock();
    return (await this.store.listWebhooks(owner)).map((w) => ({ ...webhookBody(w, now), subject: w.owner }));
  }

  async remove(owner: string | null, id: string): Promise<void> {
    if (!(await this.store.deleteWebhook(id, owner))) throw notFound(id);
  }

  async enable(owner: string | null, id: string): Promise<WebhookBody> {
    if (!(await this.store.enableWebhook(id, owner))) throw notFound(id);
    const webhook = (await this.store.listWebhooks(owner)).find((w) => w.id === id);
    if (!webhook) throw notFound(id); // deleted in between
    return webhookBody(webhook, this.clock());
  }

  /**
   * A page of deliveries, newest first: the first, or those below `before`. `next`: the `before`
   * of the page after it (the last id of this one), when older deliveries follow. One more than
   * `limit` is read to know, in the same read.
   */
  async deliveryPage(owner: string | null, id: string, limit: number, before?: bigint): Promise<DeliveryPage> {
    const found = await this.store.listDeliveries(id, owner, limit + 1, before);
    if (found === undefined) throw notFound(id);
    const page = found.slice(0, limit);
    return { deliveries: page.map(deliveryBody), next: found.length > limit ? page.at(-1)?.id : undefined };
  }

  /** GET /webhooks/{id}/activity: the hours end with the one under way by this service's clock. */
  async activity(owner: string | null, id: string): Promise<ActivityBody> {
    const now = this.clock();
    const span = activitySpan(now);
    const counts = await this.store.countAttempts(id, owner, span);
    if (counts === undefined) throw notFound(id);
    return activityBody(span, now, counts);
  }

  async retry(owner: string | null, id: string, deliveryId: bigint): Promise<void> {
    if (!(await this.store.retryDelivery(id, deliveryId, owner))) {
      throw new HttpError(404, `no delivery ${deliveryId} of webhook ${id}`);
    }
  }
}

const notFound = (id: string): HttpError => new HttpError(404, `no webhook ${id}`);

/** A recover that runs at least this long is logged as it goes, at most once this often, and at its end. */
export const RECOVER_PROGRESS_EVERY_MS = 5000;

/** Who hears of a long recover while it runs. */
export interface RecoverWatch {
  /** Its progress, its end and a stop, logged (the request's logger). */
  readonly log?: Pick<FastifyBaseLogger, 'info' | 'warn' | 'error'>;
  /** The totals so far and the time taken, at most every RECOVER_PROGRESS_EVERY_MS (the CLI prints them). */
  readonly progress?: (done: Recovered, elapsedMs: number) => void;
}

/** The answer to a recover stopped after some of its parts: what they did, and what to do. */
function recoverStopped(
  stopped: RecoverStoppedError,
  id: string,
  durationMs: number,
  log: RecoverWatch['log'],
): HttpError {
  const { requeued, created } = stopped.done;
  const unavailable = stopped.cause instanceof StoreUnavailableError;
  const fields = { webhookId: id, requeued, created, durationMs };
  if (unavailable) log?.warn({ ...fields, reason: (stopped.cause as Error).message }, 'recover stopped');
  else log?.error({ ...fields, err: stopped.cause }, 'recover stopped');
  const reason = unavailable ? 'the database is unavailable' : 'an unexpected error (logged)';
  return new HttpError(
    unavailable ? 503 : 500,
    `recover stopped after requeuing ${requeued} and creating ${created} deliveries: ${reason}; ` +
      'call it again to finish (it continues where it stopped)',
    unavailable ? { 'retry-after': UNAVAILABLE_RETRY_AFTER } : {},
  );
}

/** The event types asked for, in the one order they are stored and shown. */
const inOrder = (events: readonly EventType[]): EventType[] => EVENT_TYPES.filter((type) => events.includes(type));

/** Over HTTP a caller manages its own webhooks only; plants:admin changes which events they get. */
export const webhookOwner = (principal: Principal): string => principal.subject;
