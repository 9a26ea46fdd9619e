import { type EventType } from '../event-store.js';
import {
  type DeliveryRecord,
  type DeliveryType,
  type DisabledReason,
  PING_TYPE,
  type WebhookRecord,
} from '../webhook-store.js';

// Webhooks and deliveries as better-sqlite3 reads them (safeIntegers: every integer a bigint), and
// the records the store answers with.

export interface WebhookRow {
  id: string;
  owner: string;
  all_plants: bigint;
  url: string;
  events: string;
  status: 'active' | 'disabled';
  secret: string;
  created_at: bigint;
  description: string;
  failing_since: bigint | null;
  disabled_reason: DisabledReason | null;
  previous_secret: string | null;
  previous_secret_until: bigint | null;
}

export interface DeliveryRow {
  id: bigint;
  webhook_id: string;
  event_id: bigint;
  type: DeliveryType;
  status: DeliveryRecord['status'];
  attempts: bigint;
  last_status: bigint | null;
  last_error: string | null;
  next_attempt_at: bigint | null;
  created_at: bigint;
}

export const num = (v: bigint | null): number | null => (v === null ? null : Number(v));

export const toWebhook = (r: WebhookRow): WebhookRecord => ({
  id: r.id,
  owner: r.owner,
  allPlants: r.all_plants === 1n,
  url: r.url,
  events: r.events.split(' ') as EventType[],
  status: r.status,
  secret: r.secret,
  createdAt: Number(r.created_at),
  description: r.description,
  failingSince: num(r.failing_since),
  disabledReason: r.disabled_reason,
  previousSecret: r.previous_secret,
  previousSecretUntil: num(r.previous_secret_until),
});

export const toDelivery = (r: DeliveryRow): DeliveryRecord => ({
  id: r.id,
  webhookId: r.webhook_id,
  eventId: r.type === PING_TYPE ? null : r.event_id,
  type: r.type,
  status: r.status,
  attempts: Number(r.attempts),
  lastStatus: num(r.last_status),
  lastError: r.last_error,
  nextAttemptAt: num(r.next_attempt_at),
  createdAt: Number(r.created_at),
});
