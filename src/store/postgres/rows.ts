import type pg from 'pg';
import { classifyPostgresError } from './errors.js';
import { routerOf, throughFailover } from './hosts.js';
import { type EventType } from '../event-store.js';
import {
  type DeliveryRecord,
  type DeliveryType,
  type DisabledReason,
  PING_TYPE,
  type WebhookRecord,
} from '../webhook-store.js';

// The event side's rows on PostgreSQL, as pg reads them (BIGINT as text), and the records the
// store answers with.

export interface Row {
  [column: string]: unknown;
}

/** One query on the pool, its failure classified (a 503 where a retry may cure it). */
/**
 * The rows of one statement. With more than one server it is sent again through a failover when
 * it surely did not run, or (`repeatable`, a read) whatever happened (postgres/hosts.ts).
 */
export async function queryRows(pool: pg.Pool, text: string, values: unknown[], repeatable = false): Promise<Row[]> {
  try {
    return await throughFailover(routerOf(pool), repeatable, async () => (await pool.query<Row>(text, values)).rows);
  } catch (error) {
    throw classifyPostgresError(error);
  }
}

export const big = (v: unknown): bigint => BigInt(v as string);
export const optional = (v: unknown): number | null => (v === null ? null : Number(v));

export const toWebhook = (r: Row): WebhookRecord => ({
  id: r.id as string,
  owner: r.owner as string,
  allPlants: r.all_plants as boolean,
  url: r.url as string,
  events: (r.events as string).split(' ') as EventType[],
  status: r.status as WebhookRecord['status'],
  secret: r.secret as string,
  createdAt: Number(r.created_at),
  description: r.description as string,
  failingSince: optional(r.failing_since),
  disabledReason: r.disabled_reason as DisabledReason | null,
  previousSecret: r.previous_secret as string | null,
  previousSecretUntil: optional(r.previous_secret_until),
});

export const toDelivery = (r: Row): DeliveryRecord => ({
  id: big(r.id),
  webhookId: r.webhook_id as string,
  eventId: r.type === PING_TYPE ? null : big(r.event_id),
  type: r.type as DeliveryType,
  status: r.status as DeliveryRecord['status'],
  attempts: Number(r.attempts),
  lastStatus: optional(r.last_status),
  lastError: r.last_error as string | null,
  nextAttemptAt: optional(r.next_attempt_at),
  createdAt: Number(r.created_at),
});
