import type { OPERATIONS } from './contract.js';
import { EVENT_TYPES } from './contract.js';
import { parseExactJson } from './exact-json.js';
import { toInt64, type Int64 } from './int64.js';
import { nextLinkTarget } from './link.js';
import { type ObjectShape, isRecord, readShaped } from './shape.js';
import {
  DELIVERY_LIMIT,
  DELIVERY_TYPES,
  WEBHOOK_SHAPES,
  type Delivery,
  type DeliveryAttempt,
  type NewWebhook,
  type PingDelivery,
  type Recovered,
  type Webhook,
  type WebhookActivity,
  type WebhookActivityHour,
  type WebhookPatch,
  type WebhookWithSecret,
} from './webhook-contract.js';
import { type Answer, unexpected } from './wire.js';

// What the webhook calls write and read. Bodies carry no int64, so JSON.stringify writes them;
// answers do (delivery ids, event ids), so they are read with parseExactJson.

type WebhookPath = (typeof OPERATIONS)[
  | 'updateWebhook'
  | 'rotateWebhookSecret'
  | 'pingWebhook'
  | 'recoverDeliveries'
  | 'enableWebhook'
  | 'listDeliveries'
  | 'retryDelivery'
  | 'listDeliveryAttempts'
  | 'getWebhookActivity'
  | 'deleteWebhook']['path'];

/** The path of a call on one webhook (and one of its deliveries): the id encoded, the delivery id exact. */
export function webhookPath(template: WebhookPath, id: string, deliveryId?: Int64): string {
  if (typeof id !== 'string' || id === '') throw new TypeError('a webhook id must be a non-empty string');
  let path = template.replace('{id}', encodeURIComponent(id));
  if (path.includes('{deliveryId}')) path = path.replace('{deliveryId}', toInt64(deliveryId).toString());
  return path;
}

/**
 * The body of a create or a PATCH, as given: the server checks it (an unknown field, an empty
 * PATCH, a bad URL are 400s with its message), so a misspelt field is not dropped in silence.
 */
export function webhookJson(fields: NewWebhook | WebhookPatch, what: string): string {
  if (!isRecord(fields)) throw new TypeError(`${what} must be an object`);
  return JSON.stringify(fields);
}

/** `since` as RFC 3339 text: a Date is written in UTC; text goes as it is, for the server to check. */
export function recoverJson(since: Date | string): string {
  if (since instanceof Date) {
    if (Number.isNaN(since.getTime())) throw new RangeError('since is an invalid Date');
    return JSON.stringify({ since: since.toISOString() });
  }
  if (typeof since !== 'string') throw new TypeError('since must be a Date or RFC 3339 text');
  return JSON.stringify({ since });
}

export function rotateJson(overlapSeconds: number | undefined): string {
  return JSON.stringify(overlapSeconds === undefined ? {} : { overlapSeconds });
}

export function deliveriesQuery(limit: number | undefined, before?: Int64): URLSearchParams {
  const query = new URLSearchParams();
  if (limit !== undefined) {
    if (!(Number.isInteger(limit) && limit >= DELIVERY_LIMIT.min && limit <= DELIVERY_LIMIT.max)) {
      throw new RangeError(`limit must be an integer from ${DELIVERY_LIMIT.min} to ${DELIVERY_LIMIT.max}`);
    }
    query.set('limit', String(limit));
  }
  if (before !== undefined) query.set('before', toInt64(before).toString());
  return query;
}

/** The `before` of the next page, from `Link: rel="next"`; undefined on the last page. */
export function nextBefore(answer: Answer): bigint | undefined {
  const target = nextLinkTarget(answer.headers.get('link'));
  if (target === undefined) return undefined;
  const before = new URL(target, 'http://link.invalid/').searchParams.get('before');
  if (before === null || !/^-?[0-9]{1,19}$/.test(before))
    return unexpected(answer, 'its Link rel="next" has no before');
  return BigInt(before);
}

function body(answer: Answer): unknown {
  try {
    return parseExactJson(answer.text);
  } catch {
    return unexpected(answer, 'its body is not JSON');
  }
}

function one<T>(answer: Answer, value: unknown, shape: ObjectShape, name: string): T {
  return readShaped<T>(value, shape) ?? unexpected(answer, `its body is not a ${name}`);
}

function many(answer: Answer, name: string): unknown[] {
  const value = body(answer);
  return Array.isArray(value) ? value : unexpected(answer, `its body is not an array of ${name}`);
}

/** An event type a newer server added (an additive change) is left out of `events`: it is not an EventType. */
function knownEvents(value: unknown): unknown {
  if (!isRecord(value) || !Array.isArray(value.events)) return value;
  return { ...value, events: value.events.filter((type) => (EVENT_TYPES as readonly unknown[]).includes(type)) };
}

export const readWebhook = (answer: Answer): Webhook =>
  one(answer, knownEvents(body(answer)), WEBHOOK_SHAPES.Webhook, 'Webhook');

export const readWebhooks = (answer: Answer): Webhook[] =>
  many(answer, 'webhooks').map((item) => one(answer, knownEvents(item), WEBHOOK_SHAPES.Webhook, 'Webhook'));

export const readWithSecret = (answer: Answer): WebhookWithSecret =>
  one(answer, knownEvents(body(answer)), WEBHOOK_SHAPES.CreatedWebhook, 'Webhook with its secret');

export const readPing = (answer: Answer): PingDelivery =>
  one(answer, body(answer), WEBHOOK_SHAPES.PingDelivery, 'ping Delivery');

/** The deliveries, ids exact; those of event types this client does not know yet are skipped, as events() does. */
export const readDeliveries = (answer: Answer): Delivery[] =>
  many(answer, 'deliveries')
    .filter((item) => !isRecord(item) || (DELIVERY_TYPES as readonly unknown[]).includes(item.type))
    .map((item) => one(answer, item, WEBHOOK_SHAPES.Delivery, 'Delivery'));

export const readAttempts = (answer: Answer): DeliveryAttempt[] =>
  many(answer, 'attempts').map((item) => one(answer, item, WEBHOOK_SHAPES.DeliveryAttempt, 'DeliveryAttempt'));

export function readActivity(answer: Answer): WebhookActivity {
  const activity = one<Omit<WebhookActivity, 'hours'> & { hours: unknown[] }>(
    answer,
    body(answer),
    WEBHOOK_SHAPES.WebhookActivity,
    'WebhookActivity',
  );
  const hours = activity.hours.map((hour) =>
    one<WebhookActivityHour>(answer, hour, WEBHOOK_SHAPES.WebhookActivityHour, 'WebhookActivityHour'),
  );
  return { ...activity, hours };
}

export const readRecovered = (answer: Answer): Recovered =>
  one(answer, body(answer), WEBHOOK_SHAPES.Recovered, 'Recovered');
