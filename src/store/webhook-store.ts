// The webhooks' part of the storage port (interfaces 1.1.0 to 1.3.0): webhooks, their deliveries and
// attempts, the dispatcher's claims and leases, and the backlog the metrics read.

import { type EventType, FAN_OUT_BATCH } from './event-store.js';

export type WebhookStatus = 'active' | 'disabled';
/** Why a webhook is disabled (interface 1.2.0): a 410, 5 days of failures, or its owner. */
export type DisabledReason = 'gone' | 'failing' | 'manual';

/** A delivery's type: an event's, or a ping (POST /webhooks/{id}/ping), which is no event. */
export type DeliveryType = EventType | 'webhook.ping';
export const PING_TYPE = 'webhook.ping' satisfies DeliveryType;

export interface WebhookRecord {
  readonly id: string;
  readonly owner: string;
  /** Created by a plants:admin caller: receives every plant's events, not only the owner's. */
  readonly allPlants: boolean;
  readonly url: string;
  readonly events: readonly EventType[];
  readonly status: WebhookStatus;
  /** The signing secret as stored (sealed when SECRETS_KEY is set). */
  readonly secret: string;
  readonly createdAt: number;
  /** At most 200 characters, '' when none was given. */
  readonly description: string;
  /** The first failed attempt since the last delivered one. */
  readonly failingSince: number | null;
  readonly disabledReason: DisabledReason | null;
  /** The secret before the last rotation (sealed), still signing until `previousSecretUntil`. */
  readonly previousSecret: string | null;
  readonly previousSecretUntil: number | null;
}

/** What a new webhook is stored with; the rest starts empty. */
export type NewWebhookRecord = Omit<
  WebhookRecord,
  'description' | 'failingSince' | 'disabledReason' | 'previousSecret' | 'previousSecretUntil'
> & { readonly description?: string };

/** The fields a PATCH /webhooks/{id} changes; those absent stay. */
export interface WebhookPatch {
  readonly url?: string;
  readonly events?: readonly EventType[];
  readonly description?: string;
  readonly status?: WebhookStatus;
}

/** One attempt of a delivery, as GET …/attempts shows it. */
export interface AttemptRecord {
  /** Counts from 1 over the delivery's whole life (a recover goes on counting). */
  readonly attempt: number;
  /** When the attempt ended (the store's clock). */
  readonly at: number;
  readonly status: number | null;
  readonly durationMs: number;
  readonly error: string | null;
  /** The first 1 KiB of the receiver's answer, as text. */
  readonly response: string | null;
}

/** Consecutive buckets of time, of `bucketMs` each, from `from` (ms since the epoch). */
export interface AttemptSpan {
  readonly from: number;
  readonly bucketMs: number;
  readonly buckets: number;
}

/** How one bucket's attempts ended: `delivered`, answered 2xx; `failed`, every other (an HTTP error, no answer, refused). */
export interface AttemptCounts {
  readonly bucket: number;
  readonly delivered: number;
  readonly failed: number;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

export interface DeliveryRecord {
  readonly id: bigint;
  readonly webhookId: string;
  /** Null for a ping. */
  readonly eventId: bigint | null;
  readonly type: DeliveryType;
  readonly status: DeliveryStatus;
  readonly attempts: number;
  readonly lastStatus: number | null;
  readonly lastError: string | null;
  readonly nextAttemptAt: number | null;
  readonly createdAt: number;
}

/** A delivery a dispatcher holds a lease on, with what it needs to send it. */
export interface ClaimedDelivery {
  readonly id: bigint;
  /** Null for a ping. */
  readonly eventId: bigint | null;
  readonly type: DeliveryType;
  /** Attempts made so far, over the delivery's whole life. */
  readonly attempts: number;
  /** The attempts made before its schedule last started over (a recover): the schedule counts from here. */
  readonly scheduleFrom: number;
  /** The JSON to send ('' when its event is past retention). */
  readonly payload: string;
  readonly webhook: Pick<WebhookRecord, 'id' | 'owner' | 'url' | 'secret' | 'previousSecret' | 'previousSecretUntil'>;
}

/** What one attempt decided, recorded only while the dispatcher still holds the lease. */
export interface AttemptOutcome {
  readonly status: DeliveryStatus;
  readonly lastStatus: number | null;
  readonly lastError: string | null;
  /** For a delivery still pending: when to try again, from now by the store's clock. */
  readonly retryInMs: number | null;
  /** A 2xx: the webhook's failure streak ends. Otherwise it starts (or goes on). */
  readonly healthy: boolean;
  /** Disables the webhook at once (a 410). */
  readonly disable: 'gone' | null;
  /** Disables the webhook once it has failed every attempt for this long (5 days, docs/api.md#delivery). */
  readonly disableWhenFailingForMs: number;
  /** For the attempt log: how long the attempt took, and the start of the receiver's answer. */
  readonly durationMs: number;
  readonly response: string | null;
}

/**
 * A process's in-flight deliveries by subject (a fair share, docs/api.md#delivery): one subject whose
 * receivers hang or fail holds at most `perSubject` of them, whatever its number of webhooks.
 */
/** What a dispatcher's claim asks for (WebhookStore.claimDeliveries). */
export interface ClaimRequest {
  /** The dispatcher that leases: its leases are its own to record or release. */
  readonly holder: string;
  readonly leaseMs: number;
  /** The most deliveries leased by this claim. */
  readonly limit: number;
  /** The most of one webhook in flight at once, counting `busy`'s. */
  readonly perWebhook: number;
  /** What the claiming process has in flight now, by webhook id. */
  readonly busy: ReadonlyMap<string, number>;
  /** The most events fanned out first (FAN_OUT_BATCH when left out). */
  readonly fanOut?: number;
  /** Each subject's share, and where the turn starts (ANY_SUBJECT when left out). */
  readonly subjects?: SubjectShares;
}

export interface SubjectShares {
  readonly perSubject: number;
  /** What the claiming process has in flight now, by subject (the webhooks' owner). */
  readonly busy: ReadonlyMap<string, number>;
  /** The webhook the last claim ended with: this one starts after it (wrapping round to the first). */
  readonly after?: string | undefined;
  /**
   * How the claim treats a webhook `busy` does not count (one the dispatcher knows nothing of):
   * without this, as one with nothing in flight (`perWebhook`); with it, a slow start (see
   * Newcomers).
   */
  readonly newcomers?: Newcomers | undefined;
}

/**
 * A slow start for the webhooks a dispatcher has no count for: such a webhook may take
 * `byOrigin`'s room for its URL's origin (originOf) when the map has one (a receiver seen to
 * answer), and otherwise `room` (1: one delivery in flight until its receiver is known), for at most
 * `most` such webhooks in one claim (the newcomers' share of the process). A hanging receiver so
 * costs one slot for one timeout before it is known, not its whole share.
 */
export interface Newcomers {
  readonly byOrigin: ReadonlyMap<string, number>;
  readonly room: number;
  readonly most: number;
}

/**
 * The origin of a webhook's URL as the claim and the dispatcher both see it: everything before the
 * path (scheme, `://`, authority), as PostgreSQL's `substring(url from '^[^:]+://[^/?#]*')` reads it.
 */
export function originOf(url: string): string {
  const scheme = url.indexOf('://');
  if (scheme < 0) return url;
  const rest = url.slice(scheme + 3);
  const end = rest.search(/[/?#]/);
  return end < 0 ? url : url.slice(0, scheme + 3 + end);
}
/** originOf in PostgreSQL's words, for a column `url`. */
export const ORIGIN_SQL = (column: string): string =>
  `coalesce(substring(${column} from '^[^:]+://[^/?#]*'), ${column})`;

/** No cap by subject, and the webhooks in id order (the tests that claim for themselves). */
export const ANY_SUBJECT: SubjectShares = { perSubject: Number.MAX_SAFE_INTEGER, busy: new Map() };

/** A claim with the defaults of what it leaves out: what each adapter's claim works from. */
export const claimDefaults = (request: ClaimRequest): Required<ClaimRequest> => ({
  ...request,
  fanOut: request.fanOut ?? FAN_OUT_BATCH,
  subjects: request.subjects ?? ANY_SUBJECT,
});

/**
 * `text` as every engine stores it: U+0000, which a PostgreSQL text column refuses ("invalid byte
 * sequence for encoding UTF8: 0x00"), becomes U+FFFD, as a byte that is not UTF-8 does when read.
 */
export const storableText = (text: string): string => text.replaceAll('\u0000', '\uFFFD');

/** false: the lease was lost, nothing recorded; 'disabled': recorded, and it disabled the webhook. */
export type AttemptRecorded = boolean | 'disabled';

/** What a recover did: failed deliveries pending again, and deliveries made for what a pause missed. */
export interface Recovered {
  readonly requeued: number;
  readonly created: number;
}

export interface RecoverOptions {
  /** Called after each part has committed, with what the recover did so far. */
  readonly onProgress?: (done: Recovered) => void;
  /** The most rows (deliveries, then events) one part examines; each engine has its default. */
  readonly partRows?: number;
}

/**
 * A recover that failed after some of its parts had committed: `done` is what they did, and stays
 * done. Recover is idempotent (a requeued delivery is no longer failed, a created one is no longer
 * missing), so calling it again finishes the work. `cause` is the failure.
 */
export class RecoverStoppedError extends Error {
  override name = 'RecoverStoppedError';

  constructor(
    readonly done: Recovered,
    options: { cause: unknown },
  ) {
    super(`recover stopped after requeuing ${done.requeued} and creating ${done.created} deliveries`, options);
  }
}

export interface WebhookStore {
  /** Stores the webhook unless its owner already has `max`; false then. */
  createWebhook(webhook: NewWebhookRecord, max: number): Promise<boolean>;
  /** The owner's webhooks (null: everyone's), oldest first. */
  listWebhooks(owner: string | null): Promise<WebhookRecord[]>;
  /** False when there is no such webhook of this owner (null: of anyone). Its deliveries go with it. */
  deleteWebhook(id: string, owner: string | null): Promise<boolean>;
  /** Active again, its failure streak forgotten; false when there is no such webhook of this owner. */
  enableWebhook(id: string, owner: string | null): Promise<boolean>;
  /**
   * Changes what the patch gives (a status change as enable does, or disabled 'manual'); undefined
   * when there is no such webhook of this owner. `disabled`: this change disabled it.
   */
  updateWebhook(
    id: string,
    owner: string | null,
    patch: WebhookPatch,
  ): Promise<{ readonly webhook: WebhookRecord; readonly disabled: boolean } | undefined>;
  /**
   * A new signing secret (sealed); the current one signs too until `previousUntil` (null: from
   * now on only the new one). Undefined when there is no such webhook of this owner.
   */
  rotateSecret(
    id: string,
    owner: string | null,
    secret: string,
    previousUntil: number | null,
  ): Promise<WebhookRecord | undefined>;
  /** A new ping delivery, due now whatever the webhook's status; undefined when there is no such webhook. */
  pingWebhook(id: string, owner: string | null): Promise<DeliveryRecord | undefined>;
  /**
   * Every failed delivery of the webhook created at or after `since`: pending again, due now, its
   * schedule started over. And (interface 1.3.0) a new delivery for every event the webhook was
   * not sent while paused or disabled: each event of its subject and types committed at or after
   * `since` and after the webhook was made, already fanned out, and with no delivery to it, in
   * event order, due at the event's time as a fan-out makes it. Undefined when there is no such
   * webhook (or it was deleted meanwhile).
   *
   * Done in parts (store/recover.ts), each a transaction of its own that examines at most
   * `partRows` rows, so that no statement grows with the webhook's deliveries. A failure after a
   * part committed is a RecoverStoppedError saying what was done; before, the failure itself.
   */
  recoverDeliveries(
    id: string,
    owner: string | null,
    since: number,
    options?: RecoverOptions,
  ): Promise<Recovered | undefined>;
  /** A delivery's attempts, newest first; undefined when there is no such delivery of this webhook of this owner. */
  listAttempts(webhookId: string, deliveryId: bigint, owner: string | null): Promise<AttemptRecord[] | undefined>;
  /**
   * Newest first, at most `limit`; with `before`, only the deliveries whose id is below it (the
   * next page, read from the index on (webhook_id, id)). Undefined when there is no such webhook
   * of this owner.
   */
  listDeliveries(
    webhookId: string,
    owner: string | null,
    limit: number,
    before?: bigint,
  ): Promise<DeliveryRecord[] | undefined>;
  /**
   * The webhook's attempts that ended in [from, from + buckets × bucketMs), counted by the bucket
   * of `bucketMs` they fell in (0: the first), one aggregate read; only the buckets with any
   * attempt. Undefined when there is no such webhook of this owner.
   */
  countAttempts(webhookId: string, owner: string | null, span: AttemptSpan): Promise<AttemptCounts[] | undefined>;
  /** Pending again and due now (same webhook-id); false when there is no such delivery. */
  retryDelivery(webhookId: string, deliveryId: bigint, owner: string | null): Promise<boolean>;
  /**
   * First makes the deliveries of up to `fanOut` events not yet fanned out (a create writes only
   * its event, see docs/events.md); then leases up to `limit` due deliveries of active webhooks
   * (and the due pings of disabled ones) for `leaseMs` (store clock), skipping any another
   * dispatcher holds; at most `perWebhook` of one webhook, minus those `busy` counts, and at most
   * `subjects.perSubject` of one subject's webhooks together, minus those `subjects.busy` counts.
   * The webhooks are taken in turn from the one after `subjects.after` (round robin), and the
   * deliveries answered in that order.
   */
  claimDeliveries(request: ClaimRequest): Promise<ClaimedDelivery[]>;
  /**
   * Records an attempt, and its line in the attempt log, in the same write; false when the lease
   * was lost (another dispatcher took over).
   */
  recordAttempt(id: bigint, holder: string, outcome: AttemptOutcome): Promise<AttemptRecorded>;
  /** Gives back the leases `holder` still has (a draining dispatcher): due again at once. */
  releaseLeases(holder: string): Promise<void>;
  /**
   * Milliseconds until the next pending delivery that no dispatcher holds is due (0: now, or events
   * wait to be fanned out to an active webhook), or null when there is none (a dispatcher still
   * looks every second, for leases that run out).
   */
  nextDueInMs(): Promise<number | null>;
  /** What the metrics read of the event side; read-only, one cheap read (docs/monitoring.md). */
  webhookBacklog(): Promise<WebhookBacklog>;
}

/**
 * The deliveries still owed, for the metrics (docs/monitoring.md, docs/decisions.md). `pending`
 * counts the pending deliveries, due or not, of every webhook, active or disabled, and each event
 * still behind the delivery cursor once while any webhook is active (its deliveries are not made
 * yet: docs/events.md); the oldest of them is the first made (the lowest id), its age by the
 * store's clock, the one that stamped it.
 */
export interface WebhookBacklog {
  readonly pending: number;
  /** Milliseconds since the oldest pending delivery (or event behind the cursor) was made; 0 when none. */
  readonly oldestPendingMs: number;
  readonly webhooks: Readonly<Record<WebhookStatus, number>>;
}
