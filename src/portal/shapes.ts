import type { DisabledReason } from './words.js';

// The answers the page reads, as docs/api.md#webhooks gives them. The server's TypeBox
// schemas (src/webhooks/) are the source; the page cannot import them (they are Node modules), so
// it names the fields it uses here. Ids of deliveries and events are int64: parseJson (json.ts)
// gives a long one as its decimal text.

export type EventType = 'plant.created' | 'plant.deleted';
export const EVENT_TYPES: readonly EventType[] = ['plant.created', 'plant.deleted'];

/** Where a webhook's deliveries are published instead of POSTed (interface 1.4.0). */
export type Destination =
  { readonly broker: string; readonly subject: string } | { readonly broker: string; readonly routingKey: string };

export interface Webhook {
  readonly id: string;
  /** Null for a destination. */
  readonly url: string | null;
  readonly destination: Destination | null;
  readonly events: readonly EventType[];
  readonly status: 'active' | 'disabled';
  readonly createdAt: string;
  readonly description: string;
  readonly failingSince: string | null;
  readonly disabledReason: DisabledReason;
}

/** POST /webhooks and POST …/secret: the webhook and its secret, shown this once. */
export interface WithSecret extends Webhook {
  readonly secret: string;
}

export interface Delivery {
  readonly id: number | string;
  readonly type: EventType | 'webhook.ping';
  readonly eventId: number | string | null;
  readonly status: 'pending' | 'delivered' | 'failed';
  readonly attempts: number;
  readonly lastStatus: number | null;
  readonly lastError: string | null;
  readonly nextAttemptAt: string | null;
  readonly createdAt: string;
}

export interface Attempt {
  readonly attempt: number;
  readonly at: string;
  readonly status: number | null;
  readonly durationMs: number;
  readonly error: string | null;
  readonly response: string | null;
}

/** GET /webhooks/{id}/activity: the last 24 h of attempts, hour by hour, oldest first. */
export interface Activity {
  readonly from: string;
  readonly to: string;
  readonly hours: ReadonlyArray<{ readonly start: string; readonly delivered: number; readonly failed: number }>;
}

/** A webhook's target as the page names it: its URL, or its broker and subject or routing key. */
export function targetText(webhook: Pick<Webhook, 'url' | 'destination'>): string {
  const d = webhook.destination;
  if (webhook.url !== null || d === null) return webhook.url ?? '';
  return 'subject' in d ? `NATS ${d.broker}: ${d.subject}` : `RabbitMQ ${d.broker}: ${d.routingKey}`;
}
