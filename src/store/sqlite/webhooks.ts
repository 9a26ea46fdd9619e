import type Database from 'better-sqlite3';
import type { SqliteDeliveries } from './deliveries.js';
import { type DeliveryRow, type WebhookRow, toDelivery, toWebhook } from './rows.js';
import type { ChooseMissed, MissedPart, RecoverTarget, RequeuePart } from '../recover.js';
import {
  type AttemptCounts,
  type AttemptRecord,
  type AttemptSpan,
  type DeliveryRecord,
  type DisabledReason,
  type NewWebhookRecord,
  PING_TYPE,
  type WebhookPatch,
  type WebhookRecord,
} from '../webhook-store.js';

// Webhooks on SQLite: created, listed, deleted and enabled, and their management of interface
// 1.2.0 (PATCH, secret rotation, ping, recover, the attempt log). Each method runs inside the
// caller's write transaction, or is a read.

interface AttemptRow {
  attempt: bigint;
  at: bigint;
  status: bigint | null;
  duration_ms: bigint;
  error: string | null;
  response: string | null;
}

const OWNED = '(? IS NULL OR owner = ?)';

function missedPart(which: string): string {
  return `SELECT count(*), max(id),
      group_concat(id) FILTER (WHERE created_at >= :from AND instr(' ' || :events || ' ', ' ' || type || ' ') > 0)
    FROM (SELECT id, type, created_at FROM events ${which} id > :after AND id <= :through ORDER BY id LIMIT :rows)`;
}

/** A part's count, its last id (null: none) and a list of ids from group_concat (null: none). */
type PartRow = [bigint, bigint | null, string | null];
const numbers = (text: string | null): number[] => (text === null ? [] : text.split(',').map(Number));

export function prepareWebhookStatements(db: Database.Database) {
  const q = (sql: string) => db.prepare(sql).safeIntegers(true);
  return {
    countWebhooks: q('SELECT count(*) FROM webhooks WHERE owner = ?').pluck(),
    insertWebhook: q(`INSERT INTO webhooks (id, owner, all_plants, url, events, status, secret, created_at, description)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
    listWebhooks: q(`SELECT * FROM webhooks WHERE ${OWNED} ORDER BY created_at, id`),
    deleteWebhook: q(`DELETE FROM webhooks WHERE id = ? AND ${OWNED}`),
    deleteWebhookDeliveries: q('DELETE FROM deliveries WHERE webhook_id = ?'),
    deleteWebhookAttempts: q(
      'DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM deliveries WHERE webhook_id = ?)',
    ),
    // An active webhook stays as it is: its failure streak (failingSince) is not forgotten.
    enableWebhook: q(`UPDATE webhooks SET status = 'active', disabled_reason = NULL,
      failing_since = CASE WHEN status = 'active' THEN failing_since END
      WHERE id = ? AND ${OWNED}`),
    find: q(`SELECT * FROM webhooks WHERE id = ? AND ${OWNED}`),
    patch: q(`UPDATE webhooks SET url = coalesce(?, url), events = coalesce(?, events),
      description = coalesce(?, description) WHERE id = ?`),
    // Only an active webhook is disabled by its owner: one already disabled keeps its reason.
    disable: q(`UPDATE webhooks SET status = 'disabled', disabled_reason = ? WHERE id = ? AND status = 'active'`),
    enable: q(`UPDATE webhooks SET status = 'active', disabled_reason = NULL,
      failing_since = CASE WHEN status = 'active' THEN failing_since END WHERE id = ?`),
    // The right-hand sides read the row as it was: the current secret becomes the previous one.
    rotate: q(`UPDATE webhooks SET previous_secret = CASE WHEN :until IS NULL THEN NULL ELSE secret END,
      previous_secret_until = :until, secret = :secret WHERE id = :id AND (:owner IS NULL OR owner = :owner) RETURNING *`),
    ping: q(`INSERT INTO deliveries (webhook_id, event_id, type, status, attempts, next_attempt_at, created_at)
      VALUES (?, 0, '${PING_TYPE}', 'pending', 0, ?, ?) RETURNING *`),
    // A recover in parts (store/recover.ts), each part a write of its own. The cursor and the
    // webhook's newest delivery, read by its first write after a fan-out of every event so far.
    cursor: q('SELECT fanned_through FROM delivery_cursor').pluck(),
    newestDelivery: q(
      'SELECT coalesce(max(id), 0) FROM deliveries INDEXED BY deliveries_webhook WHERE webhook_id = ?',
    ).pluck(),
    exists: q('SELECT 1 FROM webhooks WHERE id = ?').pluck(),
    // The next deliveries of the webhook after :after up to :last (a range of deliveries_webhook):
    // how many, the last, and their event ids through the cursor, as text (one value, not a row
    // each); then the failed ones created since `since` among them pending again.
    requeueRead: q(`SELECT count(*), max(id), group_concat(event_id) FILTER (WHERE event_id BETWEEN 1 AND :through)
      FROM (SELECT id, event_id FROM deliveries INDEXED BY deliveries_webhook
        WHERE webhook_id = :id AND id > :after AND id <= :last ORDER BY id LIMIT :rows)`).raw(),
    requeue: q(`UPDATE deliveries INDEXED BY deliveries_webhook
      SET status = 'pending', schedule_from = attempts, next_attempt_at = ?
      WHERE webhook_id = ? AND id > ? AND id <= ? AND status = 'failed' AND created_at >= ?`),
    // The event ids of the webhook's deliveries past the watermark (a concurrent recover's, nearly always none).
    fresh: q(`SELECT event_id FROM deliveries INDEXED BY deliveries_webhook
      WHERE webhook_id = ? AND id > ? AND event_id BETWEEN 1 AND ?`).pluck(),
    // The next events after :after through :through the webhook may see (its owner's through
    // events_owner_id, or every event by id): how many, the last, and the ids of those it is owed
    // (of its types, since :from), as text.
    missedOwn: q(missedPart('INDEXED BY events_owner_id WHERE owner = :owner AND')).raw(),
    missedAll: q(missedPart('WHERE')).raw(),
    // The chosen events' deliveries (their ids a JSON array), made as the fan-out makes them, in
    // event order, by one statement for the part.
    makeMissed:
      q(`INSERT INTO deliveries (webhook_id, event_id, plant_id, type, status, attempts, next_attempt_at, created_at)
      SELECT ?, id, plant_id, type, 'pending', 0, created_at, created_at FROM events
      WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id`),
    deliveryOf: q(`SELECT d.id FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id
      WHERE d.id = ? AND d.webhook_id = ? AND (? IS NULL OR w.owner = ?)`).pluck(),
    attempts: q('SELECT * FROM delivery_attempts WHERE delivery_id = ? ORDER BY attempt DESC'),
    // GET /webhooks/{id}/activity in one read: a first row (bucket -1) when the webhook is the
    // owner's, then the counts of each bucket that had attempts, from delivery_attempts_webhook_at
    // alone (a covering range: this webhook's attempts of the span, nothing else).
    countAttempts: q(`WITH w AS (SELECT id FROM webhooks WHERE id = :id AND (:owner IS NULL OR owner = :owner))
      SELECT -1, 0, 0 FROM w
      UNION ALL
      SELECT (at - :from) / :bucketMs, count(*) FILTER (WHERE status BETWEEN 200 AND 299),
        count(*) FILTER (WHERE status IS NULL OR status NOT BETWEEN 200 AND 299)
      FROM delivery_attempts WHERE webhook_id = (SELECT id FROM w) AND at >= :from AND at < :until
      GROUP BY 1`).raw(),
  };
}

type Statements = ReturnType<typeof prepareWebhookStatements>;

export class SqliteWebhooks {
  constructor(
    private readonly sql: Statements,
    private readonly deliveries: SqliteDeliveries,
    private readonly now: () => number = Date.now,
  ) {}

  create(w: NewWebhookRecord, max: number): boolean {
    if ((this.sql.countWebhooks.get(w.owner) as bigint) >= BigInt(max)) return false;
    this.deliveries.fanOut(Infinity, 'jump'); // the events so far go to the webhooks of their time, not to this one
    this.sql.insertWebhook.run(
      w.id,
      w.owner,
      w.allPlants ? 1 : 0,
      w.url,
      w.events.join(' '),
      w.status,
      w.secret,
      w.createdAt,
      w.description ?? '',
    );
    return true;
  }

  list(owner: string | null): WebhookRecord[] {
    return (this.sql.listWebhooks.all(owner, owner) as WebhookRow[]).map(toWebhook);
  }

  delete(id: string, owner: string | null): boolean {
    if (this.sql.deleteWebhook.run(id, owner, owner).changes === 0) return false;
    this.sql.deleteWebhookAttempts.run(id);
    this.sql.deleteWebhookDeliveries.run(id);
    return true;
  }

  enable(id: string, owner: string | null): boolean {
    this.deliveries.fanOut(Infinity, 'jump'); // the events of its disabled time are not owed to it
    return this.sql.enableWebhook.run(id, owner, owner).changes === 1;
  }

  private find(id: string, owner: string | null): WebhookRecord | undefined {
    const row = this.sql.find.get(id, owner, owner) as WebhookRow | undefined;
    return row === undefined ? undefined : toWebhook(row);
  }

  update(
    id: string,
    owner: string | null,
    patch: WebhookPatch,
  ): { webhook: WebhookRecord; disabled: boolean } | undefined {
    const before = this.find(id, owner);
    if (before === undefined) return undefined;
    // The events so far go to the webhooks of their time (docs/events.md, the delivery cursor).
    if (patch.events !== undefined || patch.status !== undefined) this.deliveries.fanOut(Infinity, 'jump');
    this.sql.patch.run(patch.url ?? null, patch.events?.join(' ') ?? null, patch.description ?? null, id);
    let disabled = false;
    if (patch.status === 'disabled') {
      disabled = this.sql.disable.run('manual' satisfies DisabledReason, id).changes === 1;
    } else if (patch.status === 'active') this.sql.enable.run(id);
    return { webhook: this.find(id, owner)!, disabled };
  }

  rotateSecret(
    id: string,
    owner: string | null,
    secret: string,
    previousUntil: number | null,
  ): WebhookRecord | undefined {
    const row = this.sql.rotate.get({ id, owner, secret, until: previousUntil }) as WebhookRow | undefined;
    return row === undefined ? undefined : toWebhook(row);
  }

  ping(id: string, owner: string | null): DeliveryRecord | undefined {
    if (this.find(id, owner) === undefined) return undefined;
    const now = this.now();
    return toDelivery(this.sql.ping.get(id, now, now) as DeliveryRow);
  }

  /** A recover's first write: every event so far fanned out, so the cursor is now. */
  recoverStart(id: string, owner: string | null, since: number): RecoverTarget | undefined {
    const webhook = this.find(id, owner);
    if (webhook === undefined) return undefined;
    this.deliveries.fanOut(Infinity, 'jump');
    return {
      owner: webhook.owner,
      allPlants: webhook.allPlants,
      events: webhook.events.join(' '),
      from: Math.max(since, webhook.createdAt),
      through: this.sql.cursor.get() as bigint,
      lastDelivery: this.sql.newestDelivery.get(id) as bigint,
    };
  }

  requeuePart(id: string, since: number, target: RecoverTarget, after: bigint, rows: number): RequeuePart {
    const values = { id, after, last: target.lastDelivery, through: target.through, rows };
    const [count, last, eventIds] = this.sql.requeueRead.get(values) as PartRow;
    const requeued = last === null ? 0 : this.sql.requeue.run(this.now(), id, after, last, since).changes;
    return { examined: Number(count), last: last ?? after, requeued, eventIds: numbers(eventIds) };
  }

  /** A part of a recover's missed events; undefined when the webhook is gone. One writer: no lock to take. */
  missedPart(
    id: string,
    target: RecoverTarget,
    after: bigint,
    watermark: bigint,
    rows: number,
    choose: ChooseMissed,
  ): MissedPart | undefined {
    if (this.sql.exists.get(id) === undefined) return undefined;
    const fresh = (this.sql.fresh.all(id, watermark, target.through) as bigint[]).map(Number);
    const read = target.allPlants ? this.sql.missedAll : this.sql.missedOwn;
    const [count, last, wanted] = read.get({
      from: target.from,
      events: target.events,
      after,
      through: target.through,
      rows,
      ...(target.allPlants ? {} : { owner: target.owner }),
    }) as PartRow;
    const chosen = choose(fresh, numbers(wanted));
    const created = chosen.length === 0 ? 0 : this.sql.makeMissed.run(id, JSON.stringify(chosen)).changes;
    const newest = this.sql.newestDelivery.get(id) as bigint;
    return {
      examined: Number(count),
      last: last ?? after,
      created,
      watermark: newest > watermark ? newest : watermark,
    };
  }

  countAttempts(id: string, owner: string | null, span: AttemptSpan): AttemptCounts[] | undefined {
    // Bigints: a JS number is bound as a REAL, and the bucket would be a fraction.
    const from = BigInt(span.from);
    const bucketMs = BigInt(span.bucketMs);
    const until = from + bucketMs * BigInt(span.buckets);
    const rows = this.sql.countAttempts.all({ id, owner, from, bucketMs, until }) as Array<[bigint, bigint, bigint]>;
    if (rows.length === 0) return undefined;
    return rows
      .filter(([bucket]) => bucket >= 0n)
      .map(([bucket, delivered, failed]) => ({
        bucket: Number(bucket),
        delivered: Number(delivered),
        failed: Number(failed),
      }));
  }

  attempts(webhookId: string, deliveryId: bigint, owner: string | null): AttemptRecord[] | undefined {
    if (this.sql.deliveryOf.get(deliveryId, webhookId, owner, owner) === undefined) return undefined;
    return (this.sql.attempts.all(deliveryId) as AttemptRow[]).map((r) => ({
      attempt: Number(r.attempt),
      at: Number(r.at),
      status: r.status === null ? null : Number(r.status),
      durationMs: Number(r.duration_ms),
      error: r.error,
      response: r.response,
    }));
  }
}
